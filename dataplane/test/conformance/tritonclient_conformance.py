"""Drives a running dynamo-kserve data plane with the real tritonclient[grpc].

The server must serve the bundled example repository plus `identity_all` (one optional
identity input IN_<T> per datatype), in explicit model control with every model loaded.
Each check is a function; the script prints one line per check and a closing
'N passed, N failed' line, and exits non-zero if any check failed.
Usage: tritonclient_conformance.py HOST:PORT
"""

import json
import os
import queue
import sys
from typing import Any

import grpc
import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pychecks"))
from checklist import Checklist
from samples import SAMPLES

URL = sys.argv[1]
client = grpcclient.InferenceServerClient(URL)
checks = Checklist()
check = checks.add


@check
def server_live_and_ready():
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("identity_fp32")
    assert not client.is_model_ready("no_such_model")


@check
def server_metadata():
    metadata = client.get_server_metadata(as_json=True)
    assert metadata["name"] == "dynamo-kserve", metadata
    assert "model_repository" in metadata["extensions"], metadata


@check
def model_metadata():
    metadata = client.get_model_metadata("identity_fp32", as_json=True)
    assert metadata["versions"] == ["1"], metadata
    assert metadata["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": ["-1", "-1"]}], metadata


@check
def model_config():
    config = client.get_model_config("repeat_int32", as_json=True)["config"]
    assert config["backend"] == "repeat", config
    assert config["model_transaction_policy"]["decoupled"] is True, config
    assert config["input"][0]["data_type"] == "TYPE_INT32", config


@check
def repository_index():
    index = client.get_model_repository_index(as_json=True)["models"]
    names = {model["name"]: model.get("state") for model in index}
    for name in ("identity_fp32", "identity_int32", "identity_bytes", "repeat_int32", "identity_all"):
        assert names.get(name) == "READY", index


def make_identity_check(datatype, values):
    def infer_every_datatype():
        tensor = grpcclient.InferInput(f"IN_{datatype}", list(values.shape), datatype)
        tensor.set_data_from_numpy(values)
        output = grpcclient.InferRequestedOutput(f"OUT_{datatype}")
        result = client.infer("identity_all", [tensor], outputs=[output], request_id=f"id-{datatype}")
        assert result.get_response().id == f"id-{datatype}"
        received = result.as_numpy(f"OUT_{datatype}")
        assert received is not None, result.get_response()
        assert list(received.shape) == list(values.shape), (received.shape, values.shape)
        assert (received == values).all(), (received, values)

    infer_every_datatype.__name__ = f"infer_{datatype}"
    return infer_every_datatype


for _datatype, _values in SAMPLES.items():
    check(make_identity_check(_datatype, _values))


@check
def infer_batched_fp32_and_error():
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = grpcclient.InferInput("INPUT0", [3, 4], "FP32")
    tensor.set_data_from_numpy(values)
    assert (client.infer("identity_fp32", [tensor]).as_numpy("OUTPUT0") == values).all()
    wrong = grpcclient.InferInput("INPUT0", [1, 4], "INT32")
    wrong.set_data_from_numpy(np.zeros((1, 4), dtype=np.int32))
    try:
        client.infer("identity_fp32", [wrong])
    except InferenceServerException as error:
        assert error.status() == "StatusCode.INVALID_ARGUMENT", error.status()
        assert "datatype mismatch" in error.message(), error.message()
    else:
        raise AssertionError("a datatype mismatch was accepted")


def expect_error(status, call):
    try:
        call()
    except InferenceServerException as error:
        assert error.status() == status, (error.status(), error.message()[:200])
        return error.message()
    raise AssertionError(f"expected {status}")


@check
def long_client_strings_keep_their_error_code():
    # Details echo what the client sent; gRPC C-core refuses trailers past 8 KiB and would
    # report RESOURCE_EXHAUSTED instead of the real code.
    long_name = "m" * 20_000
    message = expect_error("StatusCode.NOT_FOUND", lambda: client.get_model_metadata(long_name))
    assert "bytes cut" in message and message.endswith("is not found"), message[-100:]
    tensor = grpcclient.InferInput("t" * 20_000, [1, 4], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 4), dtype=np.float32))
    expect_error("StatusCode.INVALID_ARGUMENT", lambda: client.infer("identity_fp32", [tensor]))
    # numpy has at most 64 dimensions: the one element's bytes go in as they would from an array.
    many_dims = grpcclient.InferInput("INPUT0", [1] * 10_000, "FP32")
    many_dims._raw_content = np.zeros(1, dtype=np.float32).tobytes()
    expect_error("StatusCode.INVALID_ARGUMENT", lambda: client.infer("identity_fp32", [many_dims]))


@check
def infer_onnx_model():
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), dtype=np.float32)
    inputs = [grpcclient.InferInput("INPUT0", [2, 4], "FP32"), grpcclient.InferInput("INPUT1", [2, 4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("add_sub_onnx", inputs)
    assert (result.as_numpy("OUTPUT0") == a + b).all()
    assert (result.as_numpy("OUTPUT1") == a - b).all()


@check
def async_stream_infer_decoupled():
    responses: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        tensor = grpcclient.InferInput("IN", [3], "INT32")
        tensor.set_data_from_numpy(np.array([4, 5, 6], dtype=np.int32))
        client.async_stream_infer("repeat_int32", [tensor], request_id="s", enable_empty_final_response=True)
        values, finals = [], []
        while True:
            result, error = responses.get(timeout=10)
            assert error is None, error
            final = result.get_response().parameters["triton_final_response"].bool_param
            finals.append(final)
            if final:
                break
            values.append(int(result.as_numpy("OUT")[0]))
        assert values == [4, 5, 6], values
        assert finals == [False, False, False, True], finals
    finally:
        client.stop_stream()


def llm_prompt(text):
    tensor = grpcclient.InferInput("text_input", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([text.encode()], dtype=np.object_))
    return tensor


@check
def async_stream_infer_mocker_llm():
    responses: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        client.async_stream_infer(
            "mock_llm",
            [llm_prompt("hello")],
            request_id="llm",
            parameters={"max_tokens": 6},
            enable_empty_final_response=True,
        )
        tokens = []
        while True:
            result, error = responses.get(timeout=10)
            assert error is None, error
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
            tokens.append(result.as_numpy("text_output")[0].decode())
        assert len(tokens) == 6, tokens
        assert len("".join(tokens).split(" ")) == 6, tokens
    finally:
        client.stop_stream()


@check
def unary_infer_on_an_llm_that_gathers_its_responses():
    # The reference frontend's client as written: unary ModelInfer on a decoupled LLM, one whole
    # answer (mock_llm_dynamo opts in; Triton, and every other decoupled model, refuse it).
    result = client.infer("mock_llm_dynamo", [llm_prompt("hello")], parameters={"max_tokens": 6})
    text = result.as_numpy("text_output")[0].decode()
    assert len(text.split(" ")) == 6, text
    assert result.as_numpy("finish_reason")[0] == b"length", result.as_numpy("finish_reason")


@check
def model_infer_stream_extension():
    request = service_pb2.ModelInferRequest(model_name="mock_llm", id="ext")
    request.parameters["max_tokens"].int64_param = 4
    tensor = request.inputs.add(name="text_input", datatype="BYTES", shape=[1])
    text = b"hello"
    request.raw_input_contents.append(len(text).to_bytes(4, "little") + text)
    assert tensor.name == "text_input"
    with grpc.insecure_channel(URL) as channel:
        stream = channel.unary_stream(
            "/dynamokserve.v1.InferenceExtensions/ModelInferStream",
            request_serializer=service_pb2.ModelInferRequest.SerializeToString,
            response_deserializer=service_pb2.ModelInferResponse.FromString,
        )
        responses = list(stream(request, timeout=10))
    assert len(responses) == 4, responses
    assert all(response.id == "ext" for response in responses)
    last = grpcclient.InferResult(responses[-1])
    assert last.as_numpy("finish_reason")[0] == b"length", last.as_numpy("finish_reason")


@check
def inference_statistics():
    # Runs after the identity_all checks above: one execution each.
    stats = client.get_inference_statistics("identity_all", as_json=True)["model_stats"][0]
    assert int(stats["inference_stats"]["success"]["count"]) == len(SAMPLES), stats
    assert int(stats["execution_count"]) == len(SAMPLES), stats
    assert int(stats["inference_stats"]["compute_infer"]["ns"]) > 0, stats


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
    metadata = client.get_model_metadata("identity_int32", as_json=True)
    assert metadata["inputs"][0]["shape"] == ["8"], metadata
    # A load cannot point a model elsewhere (engine, url, secrets), nor add one the repository lacks.
    hostile = {"backend": "kserve-grpc", "parameters": {"upstream": {"string_value": "127.0.0.1:9"}}}
    try:
        client.load_model("identity_int32", config=json.dumps(hostile))
        raise AssertionError("a hostile override was accepted")
    except InferenceServerException as error:
        assert error.status() == "StatusCode.INVALID_ARGUMENT", error.status()
        assert "'backend' cannot be changed by a load request" in error.message(), error.message()
    try:
        client.load_model("not_in_repository")
        raise AssertionError("a model that is not in the repository was loaded")
    except InferenceServerException as error:
        assert error.status() == "StatusCode.INTERNAL", error.status()
        assert "failed to load 'not_in_repository', failed to poll from model repository" in error.message()


checks.run(close=client.close)
