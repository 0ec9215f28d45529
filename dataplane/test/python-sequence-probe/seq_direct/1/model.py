"""A sequence model that answers each request with what it received, as JSON in SEEN: its
control tensors (START, END, READY, CORRID), request.correlation_id() and flags(), its place
in the execute call, every correlation ID of that call (0 for a null request), its instance
and its INPUT. A request parameter "delay_ms" makes the call sleep first (a slow model)."""

import json
import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


def control(request: Any, name: str) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    value = tensor.as_numpy().reshape(-1)[0]
    if isinstance(value, bytes):
        return value.decode()
    return value.item()


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        self.instance = args["model_instance_name"]

    def execute(self, requests: list[Any]) -> list[Any]:
        delay_ms = max((json.loads(r.parameters()).get("delay_ms", 0) for r in requests), default=0)
        if delay_ms:
            time.sleep(delay_ms / 1000)
        call = [str(request.correlation_id()) for request in requests]
        responses = []
        for position, request in enumerate(requests):
            seen = {
                "start": control(request, "START"),
                "end": control(request, "END"),
                "ready": control(request, "READY"),
                # As text: a JSON reader may not keep a 64-bit integer exact.
                "corrid": str(control(request, "CORRID")),
                "correlation_id": str(request.correlation_id()),
                "id_type": type(request.correlation_id()).__name__,
                "flags": request.flags(),
                "position": position,
                "call": call,
                "instance": self.instance,
                "input": control(request, "INPUT"),
            }
            # Shaped as INPUT: [1, 1] on a batching model, [1] on one that does not batch.
            shape = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().shape
            text = np.array([json.dumps(seen).encode()], dtype=np.object_).reshape(shape)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SEEN", text)]))
        return responses
