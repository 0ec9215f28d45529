"""Writes the example ONNX models with the `onnx` package's protobuf helpers.

  examples/model_repository/add_sub_onnx/1/model.onnx
      INPUT0, INPUT1: float32 [batch, 4] -> OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1
      (the classic Triton "simple" model, in FP32)
  examples/model_repository/mlp_onnx/1/model.onnx
      INPUT: float32 [batch, 64] -> Gemm 256 -> Relu -> Gemm 16 -> OUTPUT: float32 [batch, 16]
      (a small multi-layer perceptron whose weights are fixed by a seed: the dynamic batching
      example and the scheduling bench's model; each row of the batch is computed on its own)

Run with the tooling venv: ~/.cache/dynamo-kserve/venv/bin/python examples/tools/make_onnx_models.py
"""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1] / "model_repository"

MLP_SEED = 37
MLP_SIZES = (64, 256, 16)


def finished(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13)],
        producer_name="dynamo-kserve examples",
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


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
    return finished(graph)


def mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(MLP_SEED)
    inputs, hidden, outputs = MLP_SIZES
    # Scaled as He initialization would, so the outputs stay in a readable range.
    weights = {
        "w1": rng.standard_normal((inputs, hidden), dtype=np.float32) * np.float32(np.sqrt(2 / inputs)),
        "b1": rng.standard_normal(hidden, dtype=np.float32) * np.float32(0.1),
        "w2": rng.standard_normal((hidden, outputs), dtype=np.float32) * np.float32(np.sqrt(2 / hidden)),
        "b2": rng.standard_normal(outputs, dtype=np.float32) * np.float32(0.1),
    }
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["INPUT", "w1", "b1"], ["hidden"], name="layer1"),
            helper.make_node("Relu", ["hidden"], ["activated"], name="relu"),
            helper.make_node("Gemm", ["activated", "w2", "b2"], ["OUTPUT"], name="layer2"),
        ],
        "mlp",
        [helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["batch", inputs])],
        [helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, ["batch", outputs])],
        initializer=[numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    return finished(graph)


for name, model in (("add_sub_onnx", add_sub()), ("mlp_onnx", mlp())):
    path = ROOT / name / "1" / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    print(f"wrote {path} ({path.stat().st_size} bytes)")
