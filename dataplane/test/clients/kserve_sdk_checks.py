"""Drives the data plane's KServe v2 REST with the KServe SDK's REST client (InferenceRESTClient).

Usage: kserve_sdk_checks.py BASE_URL   (e.g. http://127.0.0.1:8000)
Prints one line per check and 'N passed, N failed'; exits non-zero if any check failed.
"""

import os
import sys

import httpx
import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pychecks"))
from checklist import Checklist

BASE_URL = sys.argv[1]
checks = Checklist()
check = checks.add


@check
async def health(client):
    assert await client.is_server_live(BASE_URL) is True
    assert await client.is_server_ready(BASE_URL) is True
    assert await client.is_model_ready(BASE_URL, "identity_fp32") is True


@check
async def infer_binary_and_json(client):
    values = np.arange(8, dtype=np.float32).reshape(2, 4)
    for binary in (True, False):
        tensor = InferInput(name="INPUT0", shape=[2, 4], datatype="FP32")
        tensor.set_data_from_numpy(values, binary_data=binary)
        request = InferRequest(model_name="identity_fp32", infer_inputs=[tensor], request_id=f"kserve-{binary}")
        response = await client.infer(BASE_URL, request, model_name="identity_fp32")
        assert response.id == f"kserve-{binary}", response
        assert (response.outputs[0].as_numpy() == values).all(), response.outputs[0]


@check
async def infer_bytes(client):
    tensor = InferInput(name="INPUT0", shape=[1, 2], datatype="BYTES")
    tensor.set_data_from_numpy(np.array([[b"kserve", b"sdk"]], dtype=np.object_), binary_data=False)
    response = await client.infer(BASE_URL, InferRequest("identity_bytes", [tensor]), model_name="identity_bytes")
    assert [item if isinstance(item, str) else item.decode() for item in response.outputs[0].data] == ["kserve", "sdk"]


@check
async def errors_are_http_statuses_with_the_message(client):
    tensor = InferInput(name="INPUT0", shape=[1, 4], datatype="INT32")
    tensor.set_data_from_numpy(np.zeros((1, 4), dtype=np.int32), binary_data=False)
    try:
        await client.infer(BASE_URL, InferRequest("identity_fp32", [tensor]), model_name="identity_fp32")
    except httpx.HTTPStatusError as error:
        assert error.response.status_code == 400, error
        assert "datatype mismatch" in str(error), str(error)
    else:
        raise AssertionError("a datatype mismatch was accepted")


client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=30))
checks.run(client, close=client.close)
