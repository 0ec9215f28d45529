"""Drives a running dynamo-kserve data plane's HTTP port with the real tritonclient.http.

The server must serve the bundled example repository plus `identity_all` (one optional
identity input IN_<T> per datatype), in explicit model control with every model loaded.
Each check is a function; the script prints one line per check and a closing
'N passed, N failed' line, and exits non-zero if any check failed.
Usage: tritonclient_http_conformance.py HOST:PORT
"""

import json
import os
import sys

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pychecks"))
from checklist import Checklist
from samples import SAMPLES

URL = sys.argv[1]
client = httpclient.InferenceServerClient(URL, concurrency=4)
checks = Checklist()
check = checks.add


def successes(model):
    return client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]["success"]["count"]


# Other clients may have used the server before: statistics are checked as differences.
SUCCESSES_BEFORE = successes("identity_all")


def expect_error(status, call):
    try:
        call()
    except InferenceServerException as error:
        assert error.status() == status, (error.status(), error.message()[:300])
        return error.message()
    raise AssertionError(f"no error (expected HTTP {status})")


@check
def server_live_and_ready():
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("identity_fp32")
    assert client.is_model_ready("identity_fp32", "1")
    assert not client.is_model_ready("no_such_model")


@check
def server_metadata():
    metadata = client.get_server_metadata()
    assert metadata["name"] == "dynamo-kserve", metadata
    assert "binary_tensor_data" in metadata["extensions"], metadata


@check
def model_metadata():
    metadata = client.get_model_metadata("identity_fp32")
    assert metadata["versions"] == ["1"], metadata
    assert metadata["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, -1]}], metadata
    message = expect_error("404", lambda: client.get_model_metadata("no_such_model"))
    assert "no_such_model" in message, message


@check
def model_config():
    config = client.get_model_config("repeat_int32")
    assert config["backend"] == "repeat", config
    assert config["model_transaction_policy"]["decoupled"] is True, config
    assert config["input"][0]["data_type"] == "TYPE_INT32", config


@check
def repository_index():
    index = client.get_model_repository_index()
    names = {model["name"]: model.get("state") for model in index}
    for name in ("identity_fp32", "identity_int32", "identity_bytes", "repeat_int32", "identity_all"):
        assert names.get(name) == "READY", index


# FP16 and BF16 have no JSON form (as in Triton): they travel only as binary data.
BINARY_ONLY = {"FP16", "BF16"}


def identity(datatype, values, binary_in, binary_out, **options):
    tensor = httpclient.InferInput(f"IN_{datatype}", list(values.shape), datatype)
    tensor.set_data_from_numpy(values, binary_data=binary_in)
    output = httpclient.InferRequestedOutput(f"OUT_{datatype}", binary_data=binary_out)
    result = client.infer("identity_all", [tensor], outputs=[output], request_id=f"id-{datatype}", **options)
    assert result.get_response()["id"] == f"id-{datatype}", result.get_response()
    received = result.as_numpy(f"OUT_{datatype}")
    assert received is not None, result.get_response()
    assert list(received.shape) == list(values.shape), (received.shape, values.shape)
    if datatype == "BYTES" and not binary_out:
        # JSON carries text: tritonclient hands strings back as str objects.
        received = np.array([item if isinstance(item, bytes) else item.encode() for item in received], dtype=np.object_)
    assert (received == values).all(), (received, values)


def make_identity_check(datatype, values, binary):
    def infer_every_datatype():
        identity(datatype, values, binary, binary)

    infer_every_datatype.__name__ = f"infer_{datatype}_{'binary' if binary else 'json'}"
    return infer_every_datatype


for _datatype, _values in SAMPLES.items():
    check(make_identity_check(_datatype, _values, True))
    if _datatype not in BINARY_ONLY:
        check(make_identity_check(_datatype, _values, False))


@check
def json_refuses_fp16():
    tensor = httpclient.InferInput("IN_FP16", [1], "FP16")
    tensor._data = [1.0]  # what a hand-written JSON request would send
    tensor._raw_data = None
    message = expect_error("400", lambda: client.infer("identity_all", [tensor]))
    assert "binary" in message, message


@check
def compressed_request_and_reply():
    values = np.arange(4096, dtype=np.float32)
    for request_compression, response_compression in (("gzip", "deflate"), ("deflate", "gzip")):
        tensor = httpclient.InferInput("IN_FP32", [4096], "FP32")
        tensor.set_data_from_numpy(values)
        result = client.infer(
            "identity_all",
            [tensor],
            outputs=[httpclient.InferRequestedOutput("OUT_FP32")],
            request_compression_algorithm=request_compression,
            response_compression_algorithm=response_compression,
        )
        assert (result.as_numpy("OUT_FP32") == values).all()


@check
def async_infer():
    requests = []
    for index in range(8):
        tensor = httpclient.InferInput("INPUT0", [1, 4], "FP32")
        tensor.set_data_from_numpy(np.full((1, 4), index, dtype=np.float32))
        requests.append((index, client.async_infer("identity_fp32", [tensor])))
    for index, request in requests:
        assert (request.get_result().as_numpy("OUTPUT0") == index).all()


@check
def infer_errors():
    wrong = httpclient.InferInput("INPUT0", [1, 4], "INT32")
    wrong.set_data_from_numpy(np.zeros((1, 4), dtype=np.int32))
    message = expect_error("400", lambda: client.infer("identity_fp32", [wrong]))
    assert "datatype mismatch" in message, message
    tensor = httpclient.InferInput("INPUT0", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 4), dtype=np.float32))
    message = expect_error("404", lambda: client.infer("no_such_model", [tensor]))
    assert "no_such_model" in message, message
    message = expect_error("404", lambda: client.infer("identity_fp32", [tensor], model_version="7"))
    assert "7" in message, message


@check
def infer_onnx_model():
    a = np.array([[1, 2, 3, 4]], dtype=np.float32)
    b = np.array([[10, 20, 30, 40]], dtype=np.float32)
    inputs = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=False)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("add_sub_onnx", inputs)
    assert (result.as_numpy("OUTPUT0") == a + b).all()
    assert (result.as_numpy("OUTPUT1") == a - b).all()


@check
def decoupled_model_is_refused_with_a_reason():
    tensor = httpclient.InferInput("IN", [2], "INT32")
    tensor.set_data_from_numpy(np.array([1, 2], dtype=np.int32))
    message = expect_error("501", lambda: client.infer("repeat_int32", [tensor]))
    assert "decoupled" in message, message


@check
def inference_statistics():
    stats = client.get_inference_statistics("identity_all")["model_stats"][0]
    runs = 2 * len(SAMPLES) - len(BINARY_ONLY) + 2
    assert stats["inference_stats"]["success"]["count"] - SUCCESSES_BEFORE == runs, (SUCCESSES_BEFORE, stats)
    assert stats["execution_count"] == stats["inference_stats"]["success"]["count"], stats
    assert stats["inference_stats"]["compute_infer"]["ns"] > 0, stats
    every = client.get_inference_statistics()["model_stats"]
    assert any(row["name"] == "identity_fp32" for row in every), every


@check
def log_settings():
    settings = client.get_log_settings()
    assert settings["log_info"] is True, settings
    changed = client.update_log_settings({"log_verbose_level": 1})
    assert changed["log_verbose_level"] == 1, changed
    client.update_log_settings({"log_verbose_level": 0})
    message = expect_error("400", lambda: client.update_log_settings({"log_file": "/tmp/x.log"}))
    assert "log_file" in message, message


@check
def trace_settings_answer_as_grpc_does():
    message = expect_error("501", client.get_trace_settings)
    assert "not implemented" in message, message


@check
def shared_memory_off_by_default_as_current_triton():
    # This server runs without --allow-client-shm: status answers, changes say how to allow them.
    # (shared-memory.conformance.test.ts drives it allowed, beside a real Triton.)
    assert client.get_system_shared_memory_status() == []
    assert client.get_cuda_shared_memory_status() == []
    disabled = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
    for call in (
        lambda: client.register_system_shared_memory("region", "/key", 64),
        client.unregister_system_shared_memory,
        client.unregister_cuda_shared_memory,
    ):
        assert expect_error("501", call) == disabled
    message = expect_error("404", lambda: client.get_system_shared_memory_status("region"))
    assert message == "Unable to find system shared memory region: 'region'", message


@check
def load_and_unload_model():
    client.unload_model("identity_int32")
    assert not client.is_model_ready("identity_int32")
    client.load_model("identity_int32")
    assert client.is_model_ready("identity_int32")
    override = {
        "name": "identity_int32",
        "backend": "identity",
        "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [8]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [8]}],
    }
    client.load_model("identity_int32", config=json.dumps(override))
    metadata = client.get_model_metadata("identity_int32")
    assert metadata["inputs"][0]["shape"] == [8], metadata
    message = expect_error("400", lambda: client.load_model("identity_int32", config="{not json"))
    assert "config" in message, message
    # A load cannot point a model elsewhere (engine, url, secrets), nor add one the repository lacks.
    hostile = {"backend": "openai", "parameters": {"url": {"string_value": "http://127.0.0.1:9/v1"}}}
    message = expect_error("400", lambda: client.load_model("identity_int32", config=json.dumps(hostile)))
    assert message.startswith("load failed for model 'identity_int32'"), message
    assert "'backend' cannot be changed by a load request" in message, message
    message = expect_error("500", lambda: client.load_model("not_in_repository", config=json.dumps(hostile)))
    assert "failed to load 'not_in_repository', failed to poll from model repository" in message, message
    # A partial override completes from the repository's config (dims [4]), not from the last override.
    client.load_model("identity_int32", config=json.dumps({"max_batch_size": 0}))
    assert client.get_model_metadata("identity_int32")["inputs"][0]["shape"] == [4]


checks.run(close=client.close)
