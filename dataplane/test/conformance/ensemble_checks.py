"""What tritonclient sees of the test ensembles (dataplane/test/fixtures/ensembles.ts) on one
server, as JSON on stdout: run against dynamo-kserve and against a real Triton serving the
same configs and model.py files, the two outputs must be the same.

Usage: ensemble_checks.py GRPC_URL HTTP_URL
"""

import json
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

GRPC_URL, HTTP_URL = sys.argv[1], sys.argv[2]
results = {}


def infer(module, client, model, arrays, outputs=None):
    inputs = []
    for name, array in arrays.items():
        datatype = "BYTES" if array.dtype == np.object_ else "FP32"
        tensor = module.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    requested = None if outputs is None else [module.InferRequestedOutput(name) for name in outputs]
    try:
        result = client.infer(model, inputs, outputs=requested)
    except InferenceServerException as error:
        return {"error": error.status()}
    names = (
        [output["name"] for output in result.get_response()["outputs"]]
        if module is httpclient
        else [output.name for output in result.get_response().outputs]
    )
    return {"outputs": {name: result.as_numpy(name).tolist() for name in sorted(names)}}


for label, module, client in [
    ("grpc", grpcclient, grpcclient.InferenceServerClient(GRPC_URL)),
    ("http", httpclient, httpclient.InferenceServerClient(HTTP_URL)),
]:
    a = np.array([1.5, -2, 3, 4], dtype=np.float32)
    b = np.array([10, 20, -30, 0.25], dtype=np.float32)
    results[f"{label} ensemble_python"] = infer(module, client, "ensemble_python", {"A": a, "B": b})
    results[f"{label} ensemble_python DIFF only"] = infer(module, client, "ensemble_python", {"A": a, "B": b}, ["DIFF"])
    mode = np.array([b"unsupported"], dtype=np.object_)
    results[f"{label} ensemble_failing"] = infer(module, client, "ensemble_failing", {"MODE": mode})

print(json.dumps(results, sort_keys=True))
