"""A running total per sequence: a stateful model under Triton's sequence batching.

The sequence batcher keeps each sequence on one instance and hands it the sequence's requests
one at a time, in order, with control inputs: START is 1 on a sequence's first request, END on
its last, CORRID holds its correlation ID (also request.correlation_id(); request.flags() has
the same START/END bits). The state lives here, keyed by that ID."""

from __future__ import annotations  # Triton's pb_utils has no InferenceRequest to annotate with

import numpy as np
import triton_python_backend_utils as pb_utils

# A sequence that goes idle past max_sequence_idle_microseconds is dropped by the batcher
# without telling the model: its total would stay here forever, so only this many are kept.
MAX_TOTALS = 4096


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        self.totals: dict[int, float] = {}

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse]:
        # Requests of one execute call belong to different sequences (one in flight each).
        return [self.add(request) for request in requests]

    def add(self, request: pb_utils.InferenceRequest) -> pb_utils.InferenceResponse:
        sequence = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().flat[0])
        values = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
        starts = bool(pb_utils.get_input_tensor_by_name(request, "START").as_numpy().flat[0])
        previous = self.totals.pop(sequence, 0.0)
        total = (0.0 if starts else previous) + float(values.sum())
        if not pb_utils.get_input_tensor_by_name(request, "END").as_numpy().flat[0]:
            self.totals[sequence] = total  # re-inserted: the dict's order is least recent first
            if len(self.totals) > MAX_TOTALS:
                del self.totals[next(iter(self.totals))]
        output = np.full(values.shape, total, dtype=np.float32)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", output)])
