"""Triton's example `simple_dyna_sequence`: OUTPUT = READY * (INPUT + START + END * CORRID).

Stateless, as Triton's ONNX graph: the sequence batcher's controls carry all it needs. The
UINT64 correlation ID is cast to INT32 (its low 32 bits), as the graph's Cast does."""

from __future__ import annotations  # Triton's pb_utils has no InferenceRequest to annotate with

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.delay_s = float(parameters.get("execute_delay_ms", {}).get("string_value", "0")) / 1000

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse]:
        time.sleep(self.delay_s)
        responses = []
        for request in requests:
            start, end, ready, corrid, value = (
                pb_utils.get_input_tensor_by_name(request, name).as_numpy()
                for name in ("START", "END", "READY", "CORRID", "INPUT")
            )
            value = ready * (value + start + end * corrid.astype(np.int32))
            output = pb_utils.Tensor("OUTPUT", value.astype(np.int32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
