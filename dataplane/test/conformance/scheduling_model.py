"""A Python-backend model for the scheduling tests, run alike by Triton and by the data plane:
each execute call sleeps `sleep_ms` (the config's parameter), then answers every request with
its INPUT0 as OUTPUT0. With a `log` parameter it appends a line per execute call to that file
(the instance, its process, how many requests and their values), so a test sees the calls
warmup made (a relative path is taken from the folder holding the model repository). With
`fail` set, every request is answered with an error.
"""

import json
import os
import time

import triton_python_backend_utils as pb_utils


def input0(request):
    tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
    assert tensor is not None, "INPUT0 is declared: every request has it"
    return tensor.as_numpy()


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})

        def parameter(name, default):
            return parameters.get(name, {}).get("string_value", default)

        self.instance = args["model_instance_name"]
        self.sleep_s = float(parameter("sleep_ms", "0")) / 1000
        log = parameter("log", "")
        # args["model_repository"] is the model's folder, on Triton as here.
        self.log = os.path.join(args["model_repository"], "..", "..", log) if log else ""
        self.fail = parameter("fail", "") != ""

    def execute(self, requests):
        inputs = [input0(request) for request in requests]
        if self.log:
            line = {
                "instance": self.instance,
                "pid": os.getpid(),
                "requests": len(requests),
                "values": [values.tolist() for values in inputs],
            }
            with open(self.log, "a", encoding="utf-8") as log:
                log.write(json.dumps(line) + "\n")
        time.sleep(self.sleep_s)
        if self.fail:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("this model fails")) for _ in requests]
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", values)]) for values in inputs]
