"""Calls an identity model with the stock Triton client, as any Triton user would.

    python examples/tools/infer_identity.py localhost:8001 identity-fp32

Checks the server and the model are ready, sends one FP32 [1, 4] tensor as INPUT0 and
prints OUTPUT0; exits non-zero if the output is not the input.
"""

import sys

import numpy as np
import tritonclient.grpc as grpcclient


def main(url: str, model: str) -> None:
    client = grpcclient.InferenceServerClient(url)
    if not client.is_server_ready() or not client.is_model_ready(model):
        sys.exit(f"{model} at {url} is not ready")
    values = np.arange(4, dtype=np.float32).reshape(1, 4)
    tensor = grpcclient.InferInput("INPUT0", list(values.shape), "FP32")
    tensor.set_data_from_numpy(values)
    output = client.infer(model, [tensor]).as_numpy("OUTPUT0")
    if output is None or not np.array_equal(output, values):
        sys.exit(f"{model} answered {output!r}, expected {values!r}")
    print(f"{model} OUTPUT0 = {output.tolist()}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
