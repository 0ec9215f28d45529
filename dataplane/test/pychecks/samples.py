"""One tensor of every KServe datatype, with edge values, for identity round trips."""

import ml_dtypes
import numpy as np

SAMPLES = {
    "BOOL": np.array([True, False, True], dtype=np.bool_),
    "UINT8": np.array([0, 7, 255], dtype=np.uint8),
    "UINT16": np.array([0, 7, 65535], dtype=np.uint16),
    "UINT32": np.array([0, 7, 2**32 - 1], dtype=np.uint32),
    "UINT64": np.array([0, 7, 2**64 - 1], dtype=np.uint64),
    "INT8": np.array([-128, 7, 127], dtype=np.int8),
    "INT16": np.array([-32768, 7, 32767], dtype=np.int16),
    "INT32": np.array([-(2**31), 7, 2**31 - 1], dtype=np.int32),
    "INT64": np.array([-(2**63), 7, 2**63 - 1], dtype=np.int64),
    "FP16": np.array([1.5, -2.0, 65504.0], dtype=np.float16),
    "BF16": np.array([1.0, -2.0, 0.5], dtype=ml_dtypes.bfloat16),
    "FP32": np.array([1.5, -0.25, 3.0e38], dtype=np.float32),
    "FP64": np.array([np.pi, -1e300, 0.0], dtype=np.float64),
    "BYTES": np.array([b"hello", b"", "h\u00e9llo".encode()], dtype=np.object_),
}
