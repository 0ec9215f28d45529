"""add_sub, as Triton's Python-backend example documents it: OUTPUT0 = INPUT0 + INPUT1 and
OUTPUT1 = INPUT0 - INPUT1, with output types read from the model config in initialize.
Also reports what initialize was given, through an output parameter, for the tests."""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.args = {key: args[key] for key in ("model_instance_kind", "model_name", "model_version")}
        self.output_types = [
            pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(self.model_config, name)["data_type"])
            for name in ("OUTPUT0", "OUTPUT1")
        ]
        pb_utils.Logger.log_info(f"add_sub initialized as {args['model_instance_name']}")

    def execute(self, requests):
        responses = []
        for request in requests:
            in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", (in0 + in1).astype(self.output_types[0]))
            out1 = pb_utils.Tensor("OUTPUT1", (in0 - in1).astype(self.output_types[1]))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out0, out1]))
        return responses

    def finalize(self):
        print("add_sub finalized")
