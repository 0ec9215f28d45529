"""Triton's example `simple_sequence`: OUTPUT = READY * (INPUT + START), request by request.

The model keeps no state: the sequence batcher's START and READY controls are all it reads
(a padding request of a Direct batch has READY 0 and answers 0)."""

from __future__ import annotations  # Triton's pb_utils has no InferenceRequest to annotate with

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse]:
        responses = []
        for request in requests:
            start, ready, value = (
                pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in ("START", "READY", "INPUT")
            )
            value = ready * (value + start)
            output = pb_utils.Tensor("OUTPUT", value.astype(np.int32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
