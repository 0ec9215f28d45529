"""A slow model that checks request.is_cancelled() while it works: it runs for up to
SECONDS and stops early once the request is cancelled; the last request's outcome is
logged so a test can read it."""

import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seconds = float(pb_utils.get_input_tensor_by_name(request, "SECONDS").as_numpy()[0])
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and not request.is_cancelled():
                time.sleep(0.01)
            cancelled = request.is_cancelled()
            pb_utils.Logger.log_info(f"slow_cancellable: request {request.request_id()!r} cancelled={cancelled}")
            responses.append(
                pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("CANCELLED", np.array([cancelled]))])
            )
        return responses
