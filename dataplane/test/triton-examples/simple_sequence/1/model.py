"""Triton's example `simple_sequence`: OUTPUT = READY * (INPUT + START), request by request.

The model keeps no state: the sequence batcher's START and READY controls are all it reads
(a padding request of a Direct batch has READY 0 and answers 0)."""

from __future__ import annotations  # Triton's pb_utils has no InferenceRequest to annotate with

from typing import Any

import numpy as np
import numpy.typing as npt
import triton_python_backend_utils as pb_utils


def tensor(request: pb_utils.InferenceRequest, name: str) -> npt.NDArray[Any]:
    found = pb_utils.get_input_tensor_by_name(request, name)
    if found is None:
        raise pb_utils.TritonModelException(f"the request has no '{name}' input")
    return found.as_numpy()


class TritonPythonModel:
    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse]:
        responses = []
        for request in requests:
            value = tensor(request, "READY") * (tensor(request, "INPUT") + tensor(request, "START"))
            output = pb_utils.Tensor("OUTPUT", value.astype(np.int32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
