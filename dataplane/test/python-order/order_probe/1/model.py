"""Says when and in which order each request reached the model: ARRIVAL is the request's
arrival count for its correlation ID in this process (1 for a sequence's first request here),
ARRIVED_NS the arrival time on the system's monotonic clock (comparable between processes, so
between instances), INDEX_OUT the request's INDEX. Then sleeps a random 0-20 ms, so requests
that run concurrently finish out of order."""

import random
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.arrivals = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            arrived = time.monotonic_ns()
            key = request.correlation_id()
            self.arrivals[key] = self.arrivals.get(key, 0) + 1
            time.sleep(random.uniform(0, 0.02))
            index = pb_utils.get_input_tensor_by_name(request, "INDEX").as_numpy()
            outputs = [
                pb_utils.Tensor("ARRIVAL", np.array([self.arrivals[key]], dtype=np.int32)),
                pb_utils.Tensor("ARRIVED_NS", np.array([arrived], dtype=np.int64)),
                pb_utils.Tensor("INDEX_OUT", index.astype(np.int32)),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
