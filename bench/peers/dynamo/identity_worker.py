"""An NVIDIA Dynamo worker serving the benchmark's identity models as tensor models.

Registered through Dynamo's own runtime (register_model, serve_endpoint), so its KServe
gRPC frontend (`python -m dynamo.frontend --kserve-grpc-server`) serves them as it serves
any tensor-based worker: file-based discovery, every host on 127.0.0.1. Each model answers
OUTPUT0 = INPUT0, the tensors passed in Dynamo's own tensor format.
"""

import asyncio
import sys

import uvloop
from dynamo.llm import ModelInput, ModelType, WorkerType, register_model
from dynamo.runtime import DistributedRuntime

MODELS = {"identity_fp32": "Float32", "identity_bytes": "Bytes"}


class Identity:
    def __init__(self, name: str):
        self.name = name

    async def generate(self, request: dict, *_context):
        # A health probe carries no tensors; it gets an empty answer.
        tensors = []
        for tensor in request.get("tensors") or []:
            metadata = dict(tensor["metadata"], name="OUTPUT0")
            tensors.append({"metadata": metadata, "data": tensor["data"]})
        yield {"id": request.get("id", ""), "model": self.name, "tensors": tensors}


def tensor_config(name: str, data_type: str) -> dict:
    io = lambda tensor: {"name": tensor, "data_type": data_type, "shape": [-1, -1]}  # noqa: E731
    return {"name": name, "inputs": [io("INPUT0")], "outputs": [io("OUTPUT0")]}


async def serve(runtime: DistributedRuntime, name: str, data_type: str) -> None:
    endpoint = runtime.endpoint(f"bench.{name.replace('_', '')}.generate")
    await register_model(
        ModelInput.Tensor,
        ModelType.TensorBased,
        endpoint,
        name,
        worker_type=WorkerType.Aggregated,
        tensor_model_config=tensor_config(name, data_type),
    )
    await endpoint.serve_endpoint(Identity(name).generate)


async def main() -> None:
    runtime = DistributedRuntime(asyncio.get_running_loop(), "file", "tcp")
    print("identity worker: registering", ", ".join(MODELS), file=sys.stderr, flush=True)
    await asyncio.gather(*(serve(runtime, name, data_type) for name, data_type in MODELS.items()))


if __name__ == "__main__":
    uvloop.run(main())
