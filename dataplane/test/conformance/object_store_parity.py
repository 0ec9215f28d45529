"""What tritonclient sees of a model repository one server reads from object storage, as
JSON on stdout: run against dynamo-kserve's data plane and against a real Triton reading the
same bucket, the two outputs are compared (object-store-parity.conformance.test.ts).

Usage: object_store_parity.py GRPC_URL HTTP_URL MODEL[,MODEL...] [--load MODEL]
With --load, asks the server (over gRPC) to load MODEL first (RepositoryModelLoad), as a
client does in explicit mode after a new version was put in the bucket.
"""

import json
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

GRPC_URL, HTTP_URL, MODELS = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
TO_LOAD = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--load" else None

A = np.array([1.5, 2, 3, 4], dtype=np.float32)
B = np.array([0.5, 1, 1, -1], dtype=np.float32)


def outcome(call, *args, **kwargs):
    try:
        return {"answer": call(*args, **kwargs)}
    except InferenceServerException as error:
        return {"status": str(error.status()), "message": error.message()}


def index_entries(entries):
    """The index as (name, version, state), sorted; the reason is each server's own wording."""
    return sorted([entry["name"], entry.get("version", ""), entry.get("state", "")] for entry in entries)


def add_sub_outputs(module, client, model, version=""):
    tensors = []
    for name, array in (("INPUT0", A), ("INPUT1", B)):
        tensor = module.InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    result = client.infer(model, tensors, model_version=version)
    return {name: result.as_numpy(name).tolist() for name in ("OUTPUT0", "OUTPUT1")}


def observe(protocol, module, url):
    client = module.InferenceServerClient(url)
    as_json = {"as_json": True} if protocol == "grpc" else {}
    results = {}
    index = client.get_model_repository_index(**as_json)
    results["index"] = index_entries(index.get("models", []) if protocol == "grpc" else index)
    for model in MODELS:
        results[f"{model} ready"] = client.is_model_ready(model)
        results[f"{model} metadata"] = outcome(client.get_model_metadata, model, **as_json)
        config = outcome(client.get_model_config, model, **as_json)
        if protocol == "grpc" and "answer" in config:
            config = {"answer": config["answer"]["config"]}
        results[f"{model} config"] = config
        results[f"{model} infer"] = outcome(add_sub_outputs, module, client, model)
        versions = results[f"{model} metadata"].get("answer", {}).get("versions", [])
        for version in versions:
            results[f"{model} v{version} infer"] = outcome(add_sub_outputs, module, client, model, version)
    client.close()
    return results


if TO_LOAD is not None:
    loader = grpcclient.InferenceServerClient(GRPC_URL)
    loader.load_model(TO_LOAD)
    loader.close()
print(
    json.dumps(
        {"grpc": observe("grpc", grpcclient, GRPC_URL), "http": observe("http", httpclient, HTTP_URL)},
        sort_keys=True,
    )
)
