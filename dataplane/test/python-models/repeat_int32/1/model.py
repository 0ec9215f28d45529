"""A decoupled model, as Triton's `repeat` example documents it: one response per element of
IN (OUT = the element, IDX = its index), sent from a thread of the model after execute
returned, then the final flag alone."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS")
            delay_ms = int(delay.as_numpy()[0]) if delay is not None else 0
            thread = threading.Thread(target=self.respond, args=(request.get_response_sender(), values, delay_ms))
            thread.start()
            self.threads.append(thread)

    def respond(self, sender, values, delay_ms):
        for index, value in enumerate(values):
            if sender.is_cancelled():
                break
            time.sleep(delay_ms / 1000)
            sender.send(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUT", np.array([value], dtype=np.int32)),
                        pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32)),
                    ]
                )
            )
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join()
