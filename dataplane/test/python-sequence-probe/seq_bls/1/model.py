"""Calls seq_direct with this request's INPUT, correlation ID and flags (pb_utils.InferenceRequest's
correlation_id and flags, which Triton's Python backend gives the called model's sequence
batcher) and answers with seq_direct's SEEN."""

from typing import Any

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().reshape(1, 1)
            call = pb_utils.InferenceRequest(
                model_name="seq_direct",
                inputs=[pb_utils.Tensor("INPUT", value)],
                requested_output_names=["SEEN"],
                correlation_id=request.correlation_id(),
                flags=request.flags(),
            )
            answer = call.exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(answer.error().message())))
                continue
            seen = pb_utils.get_output_tensor_by_name(answer, "SEEN").as_numpy().reshape(1)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SEEN", seen)]))
        return responses
