"""Decoupled and batched: each request of an execute call is answered from a thread of its
own, twice, DELAY_MS apart, with its index in the call and the call's number of requests;
execute itself returns at once (its instance then takes the next batch, as Triton's does)."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for index, request in enumerate(requests):
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()
            rows = delay.shape[0]
            outputs = [
                pb_utils.Tensor("INDEX", np.full((rows, 1), index, dtype=np.int32)),
                pb_utils.Tensor("REQUESTS", np.full((rows, 1), len(requests), dtype=np.int32)),
            ]
            sender = request.get_response_sender()
            threading.Thread(target=answer, args=(sender, outputs, int(delay.flat[0]) / 1000), daemon=True).start()
        # A decoupled model's execute returns None: its answers go through the senders.


def answer(sender, outputs, delay):
    sender.send(pb_utils.InferenceResponse(output_tensors=outputs))
    time.sleep(delay)
    sender.send(pb_utils.InferenceResponse(output_tensors=outputs), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
