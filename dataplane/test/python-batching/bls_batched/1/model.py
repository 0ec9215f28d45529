"""Business Logic Scripting from a batched model: every batch item of every request of the
execute call is sent to add_sub, and the answers are put back together per request."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            first = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            second = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            sums, differences, failure = [], [], None
            for row in range(first.shape[0]):
                answer = pb_utils.InferenceRequest(
                    model_name="add_sub",
                    requested_output_names=["OUTPUT0", "OUTPUT1"],
                    inputs=[pb_utils.Tensor("INPUT0", first[row]), pb_utils.Tensor("INPUT1", second[row])],
                ).exec()
                if answer.has_error():
                    failure = pb_utils.TritonError(answer.error().message())
                    break
                sums.append(pb_utils.get_output_tensor_by_name(answer, "OUTPUT0").as_numpy())
                differences.append(pb_utils.get_output_tensor_by_name(answer, "OUTPUT1").as_numpy())
            if failure is not None:
                responses.append(pb_utils.InferenceResponse(error=failure))
                continue
            outputs = [pb_utils.Tensor("OUTPUT0", np.stack(sums)), pb_utils.Tensor("OUTPUT1", np.stack(differences))]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
