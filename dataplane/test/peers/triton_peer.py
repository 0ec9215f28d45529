"""A real Triton Inference Server (the one bundled in PyPI's nvidia-pytriton) as an upstream.

Models:
  whoami          FP32 INPUT0 [-1] -> OUTPUT0 (= INPUT0) and SERVER (BYTES, this peer's name)
  stream_int32    decoupled: IN INT32 [-1], DELAY_MS INT32 [1] -> one OUT [1] per element of IN
  echo_llm        the LLM tensors: text_input BYTES [1] -> text_output "echo: <prompt>", finish_reason "stop"

Usage: triton_peer.py NAME GRPC_PORT HTTP_PORT METRICS_PORT
Prints "READY" on stdout once the models are loaded; serves until killed.
"""

import sys
import time

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

NAME, GRPC_PORT, HTTP_PORT, METRICS_PORT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


@batch
def whoami(INPUT0):
    server = np.array([[NAME.encode()]] * INPUT0.shape[0], dtype=np.object_)
    return {"OUTPUT0": INPUT0, "SERVER": server}


def stream_int32(requests):
    request = requests[0]
    values = request["IN"].reshape(-1)
    delay = int(request["DELAY_MS"].reshape(-1)[0]) if "DELAY_MS" in request else 0
    for value in values:
        if delay:
            time.sleep(delay / 1000)
        yield [{"OUT": np.array([value], dtype=np.int32)}]


def echo_llm(requests):
    replies = []
    for request in requests:
        prompt = request["text_input"].reshape(-1)[0]
        text = b"echo: " + (prompt if isinstance(prompt, bytes) else str(prompt).encode())
        replies.append(
            {"text_output": np.array([text], dtype=np.object_), "finish_reason": np.array([b"stop"], dtype=np.object_)}
        )
    return replies


config = TritonConfig(grpc_port=GRPC_PORT, http_port=HTTP_PORT, metrics_port=METRICS_PORT, log_verbose=0)
with Triton(config=config) as triton:
    triton.bind(
        model_name="whoami",
        infer_func=whoami,
        inputs=[Tensor(name="INPUT0", dtype=np.float32, shape=(-1,))],
        outputs=[Tensor(name="OUTPUT0", dtype=np.float32, shape=(-1,)), Tensor(name="SERVER", dtype=bytes, shape=(1,))],
        config=ModelConfig(max_batch_size=8),
    )
    triton.bind(
        model_name="stream_int32",
        infer_func=stream_int32,
        inputs=[
            Tensor(name="IN", dtype=np.int32, shape=(-1,)),
            Tensor(name="DELAY_MS", dtype=np.int32, shape=(1,), optional=True),
        ],
        outputs=[Tensor(name="OUT", dtype=np.int32, shape=(1,))],
        config=ModelConfig(batching=False, decoupled=True),
    )
    triton.bind(
        model_name="echo_llm",
        infer_func=echo_llm,
        inputs=[Tensor(name="text_input", dtype=bytes, shape=(1,))],
        outputs=[
            Tensor(name="text_output", dtype=bytes, shape=(1,)),
            Tensor(name="finish_reason", dtype=bytes, shape=(1,)),
        ],
        config=ModelConfig(batching=False),
    )
    print("READY", flush=True)
    triton.serve()
