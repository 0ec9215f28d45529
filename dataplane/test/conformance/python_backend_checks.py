"""What tritonclient sees of the Python-backend test models (dataplane/test/python-models)
on one server, as JSON on stdout: run against dynamo-kserve's python engine and against a
real Triton serving the same model.py files, the two outputs must be the same.

Usage: python_backend_checks.py GRPC_URL HTTP_URL
"""

import json
import queue
import sys
from functools import partial
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

GRPC_URL, HTTP_URL = sys.argv[1], sys.argv[2]
results = {}


def inputs(module, **arrays):
    made = []
    for name, array in arrays.items():
        datatype = (
            "BYTES"
            if array.dtype == np.object_
            else {np.float32: "FP32", np.int32: "INT32", np.uint32: "UINT32"}[array.dtype.type]
        )
        tensor = module.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        made.append(tensor)
    return made


def outcome(call):
    try:
        result = call()
        return {"outputs": result}
    except InferenceServerException as error:
        return {"status": str(error.status()), "message": error.message()}


A = np.array([1.5, 2, 3, 4], dtype=np.float32)
B = np.array([0.5, 1, 1, -1], dtype=np.float32)


def check_protocol(protocol, module, url):
    """The checks each client protocol makes, its results under "<protocol> ..."."""
    client = module.InferenceServerClient(url)

    def named(result, *names):
        return {name: result.as_numpy(name).tolist() for name in names}

    results[f"{protocol} add_sub"] = outcome(
        lambda: named(client.infer("add_sub", inputs(module, INPUT0=A, INPUT1=B)), "OUTPUT0", "OUTPUT1")
    )
    results[f"{protocol} add_sub OUTPUT1 only"] = outcome(
        lambda: sorted(
            output["name"]
            for output in client.infer(
                "add_sub", inputs(module, INPUT0=A, INPUT1=B), outputs=[module.InferRequestedOutput("OUTPUT1")]
            ).get_response(**({"as_json": True} if protocol == "grpc" else {}))["outputs"]
        )
    )
    results[f"{protocol} bls_add_sub -> add_sub"] = outcome(
        lambda: named(
            client.infer(
                "bls_add_sub",
                inputs(module, INPUT0=A, INPUT1=B, MODEL_NAME=np.array([b"add_sub"], dtype=np.object_)),
            ),
            "OUTPUT0",
            "OUTPUT1",
        )
    )
    # Each server words a missing model its own way: the status, and that the name is there.
    missing = outcome(
        lambda: client.infer(
            "bls_add_sub", inputs(module, INPUT0=A, INPUT1=B, MODEL_NAME=np.array([b"missing"], dtype=np.object_))
        )
    )
    results[f"{protocol} bls_add_sub -> no such model"] = {
        "status": missing.get("status"),
        "names the model": "'missing'" in missing.get("message", ""),
    }
    for mode in ("invalid", "unsupported", "default", "raise"):
        mode_input = inputs(module, MODE=np.array([mode.encode()], dtype=np.object_))
        results[f"{protocol} raises_error {mode}"] = outcome(partial(client.infer, "raises_error", mode_input))
    results[f"{protocol} add_sub wrong shape"] = {
        "refused": "status" in outcome(lambda: client.infer("add_sub", inputs(module, INPUT0=A[:3], INPUT1=B[:3])))
    }


for protocol, module, url in (("grpc", grpcclient, GRPC_URL), ("http", httpclient, HTTP_URL)):
    check_protocol(protocol, module, url)


# auto_complete_config: the config both servers show, and a batched request on it.
def declared(config):
    return {
        "max_batch_size": int(config.get("max_batch_size", 0)),
        "dynamic_batching": "dynamic_batching" in config,
        "tensors": [
            [kind, tensor["name"], tensor["data_type"], [int(dim) for dim in tensor["dims"]]]
            for kind in ("input", "output")
            for tensor in config.get(kind, [])
        ],
    }


results["grpc auto_complete config"] = declared(
    grpcclient.InferenceServerClient(GRPC_URL).get_model_config("auto_complete", as_json=True)["config"]
)
results["http auto_complete config"] = declared(
    httpclient.InferenceServerClient(HTTP_URL).get_model_config("auto_complete")
)
batched = np.arange(8, dtype=np.float32).reshape(2, 4)
results["grpc auto_complete [2, 4]"] = outcome(
    lambda: (
        grpcclient.InferenceServerClient(GRPC_URL)
        .infer("auto_complete", inputs(grpcclient, INPUT0=batched, INPUT1=batched))
        .as_numpy("OUTPUT0")
        .tolist()
    )
)

# The dynamic batcher: 6 requests holding 8 batch items (max_batch_size 8, a 2 s queue
# delay) sent at once are executed in one call of 6 requests.
client = grpcclient.InferenceServerClient(GRPC_URL)
answers: queue.Queue[Any] = queue.Queue()
for items in (1, 2, 1, 2, 1, 1):
    client.async_infer(
        "batch_counter",
        inputs(grpcclient, INPUT0=np.zeros((items, 1), dtype=np.int32)),
        callback=lambda result, error: answers.put(error or result.as_numpy("REQUESTS").flatten().tolist()),
    )
results["grpc batch_counter 6 requests, 8 items"] = sorted(str(answers.get(timeout=30)) for _ in range(6))

# Tensors small and large (those of 64 KiB and more take shared memory in our engine), each
# request after the others so the shared regions are reused: the same values come back.
client = grpcclient.InferenceServerClient(GRPC_URL)


def identity(values):
    return client.infer("identity_fp32", inputs(grpcclient, INPUT0=values)).as_numpy("OUTPUT0")


for elements in (16, 16 * 1024, 300_000, 1_000_000, 300_000):
    values = (np.arange(elements, dtype=np.float32) * 0.5).reshape(1, elements)
    answer = outcome(partial(identity, values))
    results[f"grpc identity_fp32 {elements}"] = (
        {"same values": bool(np.array_equal(answer["outputs"], values))} if "outputs" in answer else answer
    )

# A decoupled model over the gRPC stream: every response, then the empty final one.
client = grpcclient.InferenceServerClient(GRPC_URL)
streamed: queue.Queue[Any] = queue.Queue()
client.start_stream(callback=lambda result, error: streamed.put((result, error)))
client.async_stream_infer(
    "repeat_int32",
    inputs(grpcclient, IN=np.array([4, 5, 6, 7], dtype=np.int32), DELAY_MS=np.array([5], dtype=np.uint32)),
    request_id="r1",
    enable_empty_final_response=True,
)
stream: list[dict[str, Any]] = []
while True:
    result, error = streamed.get(timeout=30)
    if error is not None:
        stream.append({"error": str(error)})
        break
    response = result.get_response()
    final = response.parameters["triton_final_response"].bool_param
    stream.append(
        {
            "id": response.id,
            "final": final,
            "OUT": None if final else result.as_numpy("OUT").tolist(),
            "IDX": None if final else result.as_numpy("IDX").tolist(),
        }
    )
    if final:
        break
client.stop_stream()
results["grpc stream repeat_int32"] = stream
results["grpc repeat_int32 on ModelInfer"] = outcome(
    lambda: client.infer("repeat_int32", inputs(grpcclient, IN=np.array([1], dtype=np.int32)))
)
results["grpc repeat_int32 on ModelInfer"].pop("message", None)

print(json.dumps(results, indent=1, sort_keys=True))
