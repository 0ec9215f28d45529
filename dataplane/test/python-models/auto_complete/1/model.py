"""A model that declares its own config, as Triton's documentation shows for
auto_complete_config: config.pbtxt says only `backend: "python"`; the model adds its
inputs and output, a max_batch_size and the dynamic batcher. initialize checks that it
is given the completed config."""

import json

import triton_python_backend_utils as pb_utils

INPUTS = [
    {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
    {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]},
]
OUTPUT = {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        declared = {tensor["name"] for tensor in auto_complete_model_config.as_dict()["input"]}
        for tensor in INPUTS:
            if tensor["name"] not in declared:
                auto_complete_model_config.add_input(tensor)
        auto_complete_model_config.add_output(OUTPUT)
        auto_complete_model_config.set_max_batch_size(8)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def initialize(self, args):
        config = json.loads(args["model_config"])
        if config["max_batch_size"] != 8 or [output["name"] for output in config["output"]] != ["OUTPUT0"]:
            raise pb_utils.TritonModelException(f"initialize was not given the completed config: {config}")

    def execute(self, requests):
        responses = []
        for request in requests:
            product = (
                pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                * pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            )
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", product)]))
        return responses
