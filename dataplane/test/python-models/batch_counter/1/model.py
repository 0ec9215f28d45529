"""Answers each request with the number of requests in the execute call that held it
(one per batch item of the request): what the dynamic batcher put together."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            items = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().shape[0]
            count = np.full((items, 1), len(requests), dtype=np.int32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("REQUESTS", count)]))
        return responses
