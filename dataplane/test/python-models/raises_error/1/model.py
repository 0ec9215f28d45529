"""Errors a model reports: MODE "invalid" answers TritonError(INVALID_ARG), "unsupported"
TritonError(UNSUPPORTED), "default" TritonError with its default code, "raise" raises an
exception from execute."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            if mode == "raise":
                raise ValueError("the model raised on purpose")
            if mode == "invalid":
                error = pb_utils.TritonError(
                    "MODE asked for an invalid-argument error", pb_utils.TritonError.INVALID_ARG
                )
            elif mode == "unsupported":
                error = pb_utils.TritonError("MODE asked for an unsupported error", pb_utils.TritonError.UNSUPPORTED)
            else:
                error = pb_utils.TritonError("MODE asked for a default error")
            responses.append(pb_utils.InferenceResponse(error=error))
        return responses
