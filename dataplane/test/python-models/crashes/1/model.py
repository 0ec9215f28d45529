"""A model that takes its interpreter down: HOW "exit" ends the process, "hang" stops it
(SIGSTOP: it answers nothing, not even health checks), anything else answers its process id."""

import os
import signal

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            how = pb_utils.get_input_tensor_by_name(request, "HOW").as_numpy()[0].decode()
            if how == "exit":
                os._exit(3)
            if how == "hang":
                os.kill(os.getpid(), signal.SIGSTOP)
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64))]
                )
            )
        return responses
