"""Writes the example ONNX models with the `onnx` package's protobuf helpers.

  examples/model_repository/add_sub_onnx/1/model.onnx
      INPUT0, INPUT1: float32 [batch, 4] -> OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1
      (the classic Triton "simple" model, in FP32)

Run with the tooling venv: ~/.cache/dynamo-kserve/venv/bin/python examples/tools/make_onnx_models.py
"""

from pathlib import Path

import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1] / "model_repository"


def add_sub() -> onnx.ModelProto:
    tensor = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 4])  # noqa: E731
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"], name="add"),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"], name="sub"),
        ],
        "add_sub",
        [tensor("INPUT0"), tensor("INPUT1")],
        [tensor("OUTPUT0"), tensor("OUTPUT1")],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13)],
        producer_name="dynamo-kserve examples",
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


path = ROOT / "add_sub_onnx" / "1" / "model.onnx"
path.parent.mkdir(parents=True, exist_ok=True)
onnx.save(add_sub(), str(path))
print(f"wrote {path} ({path.stat().st_size} bytes)")
