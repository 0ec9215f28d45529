"""Sends bodies over the limit over TLS with requests and tritonclient.http, as a user would.

Usage: tls_413_checks.py HOST:PORT CA_FILE LIMIT CLIENT
  CLIENT  "requests" or "tritonclient"
Prints one line per body: its size and the status (or the exception) the client saw.
"""

import sys

HOST_PORT, CA_FILE, LIMIT, CLIENT = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
SIZES = (4 * LIMIT, 64 * LIMIT)


def with_requests(size: int) -> str:
    import requests

    reply = requests.post(
        f"https://{HOST_PORT}/v2/models/identity_fp32/infer",
        data=b" " * size,
        headers={"content-type": "application/json"},
        verify=CA_FILE,
    )
    return f"{reply.status_code} {reply.json()['error']}"


def with_tritonclient(size: int) -> str:
    import numpy as np
    from tritonclient import http
    from tritonclient.utils import InferenceServerException

    client = http.InferenceServerClient(HOST_PORT, ssl=True, ssl_options={"ca_certs": CA_FILE})
    values = np.zeros((1, size // 4), dtype=np.float32)
    tensor = http.InferInput("INPUT0", list(values.shape), "FP32")
    tensor.set_data_from_numpy(values, binary_data=True)
    try:
        client.infer("identity_fp32", [tensor])
    except InferenceServerException as error:
        return f"{error.status()} {error.message()}"
    return "200"


for size in SIZES:
    try:
        print(size, (with_requests if CLIENT == "requests" else with_tritonclient)(size))
    except Exception as error:  # what the defect looked like: an SSL EOF
        print(size, type(error).__name__, error)
