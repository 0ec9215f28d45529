"""Triton's `simple_string_dyna_sequence` (its dyna_sequence test backend, CORRID as text).

Each instance keeps an INT32 accumulator per correlation ID: START sets it to the sum of
INPUT, any other ready request adds that sum, END adds the ID (decimal text, as Triton's
backend requires) and forgets the sequence. A ready request answers the accumulator in every
element of OUTPUT; a request that is not ready (padding) changes nothing and answers zeros."""

from __future__ import annotations  # Triton's pb_utils has no InferenceRequest to annotate with

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def int32(number: int) -> int:
    """`number` wrapped to INT32, as the C++ backend's accumulator wraps."""
    return (number + 2**31) % 2**32 - 2**31


def flag(request: pb_utils.InferenceRequest, name: str) -> bool:
    return bool(pb_utils.get_input_tensor_by_name(request, name).as_numpy().flat[0])


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.delay_s = float(parameters.get("execute_delay_ms", {}).get("string_value", "0")) / 1000
        self.accumulators: dict[int, int] = {}

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse]:
        time.sleep(self.delay_s)
        return [self.answer(request) for request in requests]

    def answer(self, request: pb_utils.InferenceRequest) -> pb_utils.InferenceResponse:
        values = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
        if not flag(request, "READY"):
            return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", np.zeros_like(values))])
        text = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().flat[0]
        try:
            corrid = int(text)
        except ValueError:
            error = pb_utils.TritonError("dyna sequence backend expects correlation ID to be decodable into an integer")
            return pb_utils.InferenceResponse(error=error)
        total = int(values.astype(np.int64).sum())
        start = flag(request, "START")
        accumulator = total if start else self.accumulators.get(corrid, 0) + total
        if flag(request, "END"):
            accumulator += corrid
            self.accumulators.pop(corrid, None)
        else:
            self.accumulators[corrid] = int32(accumulator)
        output = np.full(values.shape, int32(accumulator), dtype=np.int32)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", output)])
