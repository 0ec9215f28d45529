"""Writes the storage bench's two 100 MiB models into two model repositories under
argument 1 (onnx/ and python/, one model each):

  onnx/table_onnx/1/model.onnx     ONNX: ROW = Gather(TABLE, INDEX), TABLE a 100 MiB FP32 initializer
  python/table_python/1/model.py   Python backend: the same lookup, TABLE read from table.bin
                                   (100 MiB) in initialize (Triton's PyPI build has no ONNX
                                   backend: this is the model both Triton and the data plane load)

TABLE is [6553600, 4] with every element of row i equal to i, so ROW tells which row was read.
Run with the tooling venv (it has `onnx` and numpy): ~/.cache/dynamo-kserve/venv/bin/python.
"""

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROWS, WIDTH = 6_553_600, 4  # 6553600 * 4 * 4 bytes = 100 MiB
REPOSITORY = Path(sys.argv[1])

TABLE = np.repeat(np.arange(ROWS, dtype=np.float32)[:, None], WIDTH, axis=1)

ONNX_CONFIG = """name: "table_onnx"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INDEX" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "ROW" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
"""

PYTHON_CONFIG = """name: "table_python"
backend: "python"
max_batch_size: 0
input [ { name: "INDEX" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "ROW" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

PYTHON_MODEL = '''"""ROW = TABLE[INDEX], TABLE (100 MiB) read from table.bin beside this file."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        folder = os.path.join(args["model_repository"], args["model_version"])
        self.table = np.fromfile(os.path.join(folder, "table.bin"), dtype=np.float32).reshape(-1, 4)

    def execute(self, requests):
        responses = []
        for request in requests:
            index = pb_utils.get_input_tensor_by_name(request, "INDEX").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("ROW", self.table[index])]))
        return responses
'''


def write_onnx(folder: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Gather", ["TABLE", "INDEX"], ["ROW"], axis=0, name="lookup")],
        "table",
        [helper.make_tensor_value_info("INDEX", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("ROW", TensorProto.FLOAT, ["n", WIDTH])],
        initializer=[numpy_helper.from_array(TABLE, "TABLE")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="dynamo-kserve bench")
    model.ir_version = 8
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(ONNX_CONFIG)
    onnx.save(model, str(folder / "1" / "model.onnx"))


def write_python(folder: Path) -> None:
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(PYTHON_CONFIG)
    (folder / "1" / "model.py").write_text(PYTHON_MODEL)
    TABLE.tofile(folder / "1" / "table.bin")


write_onnx(REPOSITORY / "onnx" / "table_onnx")
write_python(REPOSITORY / "python" / "table_python")
for path in sorted(REPOSITORY.rglob("*")):
    if path.is_file():
        print(f"{path.relative_to(REPOSITORY)}: {path.stat().st_size} bytes")
