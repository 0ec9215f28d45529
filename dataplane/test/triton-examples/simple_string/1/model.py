"""Triton's example `simple_string`: decimal numbers in BYTES elements, added and subtracted."""

from __future__ import annotations  # Triton's pb_utils has no InferenceRequest to annotate with

from typing import Any

import numpy as np
import numpy.typing as npt
import triton_python_backend_utils as pb_utils


def as_numbers(request: pb_utils.InferenceRequest, name: str) -> npt.NDArray[np.int32]:
    """Each element of input `name` read as a decimal integer."""
    found = pb_utils.get_input_tensor_by_name(request, name)
    if found is None:
        raise pb_utils.TritonModelException(f"the request has no '{name}' input")
    elements: npt.NDArray[Any] = found.as_numpy()
    return np.vectorize(int, otypes=[np.int32])(elements)


def as_text(numbers: npt.NDArray[np.int32]) -> npt.NDArray[np.object_]:
    return np.vectorize(lambda number: str(number).encode(), otypes=[np.object_])(numbers)


class TritonPythonModel:
    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse]:
        responses = []
        for request in requests:
            in0 = as_numbers(request, "INPUT0")
            in1 = as_numbers(request, "INPUT1")
            outputs = [pb_utils.Tensor("OUTPUT0", as_text(in0 + in1)), pb_utils.Tensor("OUTPUT1", as_text(in0 - in1))]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
