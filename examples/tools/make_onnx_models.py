"""Writes the example ONNX models with the `onnx` package's protobuf helpers.

  examples/model_repository/add_sub_onnx/1/model.onnx
      INPUT0, INPUT1: float32 [batch, 4] -> OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1
      (the classic Triton "simple" model, in FP32)
  examples/model_repository/mlp_onnx/1/model.onnx
      INPUT: float32 [batch, 64] -> Gemm 512 -> Relu -> Gemm 512 -> Relu -> Gemm 16 -> OUTPUT:
      float32 [batch, 16]
      (a small multi-layer perceptron whose weights are fixed by a seed: the dynamic batching
      example and the scheduling bench's model; each row of the batch is computed on its own)

and the models the onnx engine's tests run (dataplane/test/onnx-models/):

  ragged_sum.onnx
      INPUT: float32 [n] (every request's elements, joined: a ragged input), OFFSETS: int32
      [requests + 1] (Triton's BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO), COUNTS: float32
      [requests] (BATCH_ELEMENT_COUNT) -> SUM: float32 [requests, 1] (each request's elements
      added up), COUNT: float32 [requests, 1] (COUNTS as it came)
  wrong_batch.onnx
      INPUT: float32 [batch, 4] -> OUTPUT: float32 [1, 4], the rows added up (an output that
      is not one row per batch item)
  sequence_controls.onnx
      INPUT: float32 [batch, 1], and sequence_batching's control inputs START: int32, END:
      float32, READY: bool, CORRID: uint64, each [batch, 1] -> OUTPUT: float32 [batch, 5], each
      row INPUT, START, END, READY, CORRID as floats (what the model was given, per request)

Run with the tooling venv: ~/.cache/dynamo-kserve/venv/bin/python examples/tools/make_onnx_models.py
With `--mlp PATH --hidden 1024,1024,1024` it writes only an MLP of those hidden layers (same
seed, same input and output) to PATH: the scheduling bench's heavier model.
"""

import argparse
from itertools import pairwise
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1] / "model_repository"
TEST_MODELS = Path(__file__).resolve().parents[2] / "dataplane" / "test" / "onnx-models"

MLP_SEED = 37
# Two hidden layers of 512: enough work per row (about 300k multiply-adds) that a batch's
# one matrix product beats as many vector products, as a real model's would.
MLP_SIZES = (64, 512, 512, 16)


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


def mlp(sizes: tuple[int, ...] = MLP_SIZES) -> onnx.ModelProto:
    rng = np.random.default_rng(MLP_SEED)
    nodes: list[onnx.NodeProto] = []
    weights: list[onnx.TensorProto] = []
    layers = list(pairwise(sizes))
    previous = "INPUT"
    for index, (inputs, outputs) in enumerate(layers):
        last = index == len(layers) - 1
        # Scaled as He initialization would, so the outputs stay in a readable range.
        weight = rng.standard_normal((inputs, outputs), dtype=np.float32) * np.float32(np.sqrt(2 / inputs))
        bias = rng.standard_normal(outputs, dtype=np.float32) * np.float32(0.1)
        weights += [numpy_helper.from_array(weight, f"w{index}"), numpy_helper.from_array(bias, f"b{index}")]
        result = "OUTPUT" if last else f"linear{index}"
        nodes.append(helper.make_node("Gemm", [previous, f"w{index}", f"b{index}"], [result], name=f"layer{index}"))
        if not last:
            nodes.append(helper.make_node("Relu", [result], [f"hidden{index}"], name=f"relu{index}"))
            previous = f"hidden{index}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["batch", sizes[0]])],
        [helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, ["batch", sizes[-1]])],
        initializer=weights,
    )
    return finished(graph)


def ragged_sum() -> onnx.ModelProto:
    int64s = lambda name, values: numpy_helper.from_array(np.array(values, dtype=np.int64), name)  # noqa: E731
    nodes = [
        # Running totals with a leading 0: a request's sum is the total at its end minus at its start.
        helper.make_node("Concat", ["zero", "INPUT"], ["padded"], axis=0),
        helper.make_node("CumSum", ["padded", "axis0"], ["totals"]),
        helper.make_node("Slice", ["OFFSETS", "one", "end"], ["ends"]),
        helper.make_node("Slice", ["OFFSETS", "start", "last"], ["starts"]),
        helper.make_node("Gather", ["totals", "ends"], ["at_end"]),
        helper.make_node("Gather", ["totals", "starts"], ["at_start"]),
        helper.make_node("Sub", ["at_end", "at_start"], ["sums"]),
        helper.make_node("Unsqueeze", ["sums", "axis1"], ["SUM"]),
        helper.make_node("Unsqueeze", ["COUNTS", "axis1"], ["COUNT"]),
    ]
    graph = helper.make_graph(
        nodes,
        "ragged_sum",
        [
            helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["elements"]),
            helper.make_tensor_value_info("OFFSETS", TensorProto.INT32, ["requests_and_one"]),
            helper.make_tensor_value_info("COUNTS", TensorProto.FLOAT, ["requests"]),
        ],
        [
            helper.make_tensor_value_info("SUM", TensorProto.FLOAT, ["requests", 1]),
            helper.make_tensor_value_info("COUNT", TensorProto.FLOAT, ["requests", 1]),
        ],
        initializer=[
            numpy_helper.from_array(np.zeros(1, dtype=np.float32), "zero"),
            int64s("axis0", 0),
            int64s("axis1", [1]),
            int64s("one", [1]),
            int64s("start", [0]),
            int64s("end", [np.iinfo(np.int64).max]),
            int64s("last", [-1]),
        ],
    )
    return finished(graph)


def wrong_batch() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["INPUT", "axis0"], ["OUTPUT"], keepdims=1)],
        "wrong_batch",
        [helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(np.array([0], dtype=np.int64), "axis0")],
    )
    return finished(graph)


def sequence_controls() -> onnx.ModelProto:
    controls = (
        ("START", TensorProto.INT32),
        ("END", TensorProto.FLOAT),
        ("READY", TensorProto.BOOL),
        ("CORRID", TensorProto.UINT64),
    )
    nodes = [helper.make_node("Cast", [name], [f"{name}_f"], to=TensorProto.FLOAT) for name, _ in controls]
    nodes.append(helper.make_node("Concat", ["INPUT", *(f"{name}_f" for name, _ in controls)], ["OUTPUT"], axis=1))
    graph = helper.make_graph(
        nodes,
        "sequence_controls",
        [helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["batch", 1])]
        + [helper.make_tensor_value_info(name, datatype, ["batch", 1]) for name, datatype in controls],
        [helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, ["batch", 5])],
    )
    return finished(graph)


def save(model: onnx.ModelProto, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    print(f"wrote {path} ({path.stat().st_size} bytes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mlp", type=Path, help="write only an MLP, to this path")
    parser.add_argument("--hidden", default="512,512", help="the MLP's hidden layer sizes (with --mlp)")
    args = parser.parse_args()
    if args.mlp is not None:
        hidden = tuple(int(size) for size in args.hidden.split(","))
        save(mlp((MLP_SIZES[0], *hidden, MLP_SIZES[-1])), args.mlp)
        return
    for name, model in (("add_sub_onnx", add_sub()), ("mlp_onnx", mlp())):
        save(model, ROOT / name / "1" / "model.onnx")
    for name, model in (
        ("ragged_sum", ragged_sum()),
        ("wrong_batch", wrong_batch()),
        ("sequence_controls", sequence_controls()),
    ):
        save(model, TEST_MODELS / f"{name}.onnx")


if __name__ == "__main__":
    main()
