"""Triton's example `simple_string`: strings that spell integers, summed and subtracted."""

import numpy as np
import triton_python_backend_utils as pb_utils


def as_strings(values):
    return np.array([str(value).encode("utf-8") for value in values.flatten()], dtype=np.object_).reshape(values.shape)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().astype(np.int32)
            in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy().astype(np.int32)
            outputs = [
                pb_utils.Tensor("OUTPUT0", as_strings(in0 + in1)),
                pb_utils.Tensor("OUTPUT1", as_strings(in0 - in1)),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
