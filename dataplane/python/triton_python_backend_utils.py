"""The `triton_python_backend_utils` API that Triton Python-backend models import, for models
hosted by dynamo-kserve's `python` engine (dynamo_kserve_python_stub.py).

Written from Triton's public documentation of the Python backend's API (the README of
triton-inference-server/python_backend): the same names, arguments and behaviour, on
numpy arrays in this process. What Triton offers and this module does not (GPU tensors,
custom metrics, request rescheduling, model loading from a model) raises
TritonModelException saying so.
"""

# Annotations stay text (Python versions: see the stub's note).
from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    import numpy.typing as npt

# Flags of InferenceResponseSender.send, as Triton's C API numbers them.
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
# InferenceRequest flags (sequence batching).
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2


class _RequestHandle(Protocol):
    """What the stub knows of a request it gave execute (its RequestHandle)."""

    decoupled: bool
    cancelled: bool
    finished: bool


class _Host(Protocol):
    """What this module asks of the stub (its Host)."""

    def send_response(self, handle: Any, response: InferenceResponse | None, final: bool) -> None: ...

    def bls(self, request: InferenceRequest, stream: bool) -> Iterator[InferenceResponse]: ...

    def log(self, level: str, message: str) -> None: ...


# The stub that hosts this process's model: it sends responses, runs BLS requests and
# writes log lines for the data plane. Set by the stub before the model is loaded.
_host: _Host | None = None


def _the_host() -> _Host:
    if _host is None:
        raise TritonModelException("this module is used outside the stub that hosts models")
    return _host


class TritonError(Exception):
    """An error a model returns in an InferenceResponse (or raises), with Triton's codes."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message: object, code: int = INTERNAL) -> None:
        super().__init__(message)
        self._message = str(message)
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code


class TritonModelException(Exception):
    """Raised by this module when a model asks for something it cannot have (as Triton's)."""

    def __init__(self, message: object) -> None:
        super().__init__(message)
        self._message = str(message)

    def message(self) -> str:
        return self._message


# KServe datatypes <-> numpy, and Triton's config type names (TYPE_*) -> numpy.
_NUMPY_OF_DATATYPE: dict[str, type[np.generic]] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}
_DATATYPE_OF_NUMPY = {
    np.dtype(numpy_type): datatype for datatype, numpy_type in _NUMPY_OF_DATATYPE.items() if datatype != "BYTES"
}


def triton_string_to_numpy(triton_type_string: str) -> type[np.generic]:
    """The numpy type of a config's data_type (e.g. "TYPE_FP32" -> np.float32)."""
    name = triton_type_string[len("TYPE_") :] if triton_type_string.startswith("TYPE_") else triton_type_string
    if name == "STRING":
        return np.object_
    if name not in _NUMPY_OF_DATATYPE:
        raise TritonModelException(f"data type {triton_type_string} has no numpy type")
    return _NUMPY_OF_DATATYPE[name]


def datatype_of_numpy(dtype: npt.DTypeLike) -> str:
    """The KServe datatype of a numpy dtype (object and bytes arrays are BYTES)."""
    known = np.dtype(dtype)
    if known.kind in ("O", "S", "U"):
        return "BYTES"
    if known not in _DATATYPE_OF_NUMPY:
        raise TritonModelException(f"numpy type {known} has no Triton datatype")
    return _DATATYPE_OF_NUMPY[known]


def serialize_byte_tensor(input_tensor: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    """A BYTES array as Triton sends it: each element's length (uint32 LE) then its bytes.
    Returns a one-dimensional uint8 array (an empty one for an empty input)."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.uint8)
    parts: list[bytes] = []
    for element in np.asarray(input_tensor, dtype=np.object_).reshape(-1, order="C"):
        if isinstance(element, (bytes, bytearray)):
            encoded = bytes(element)
        else:
            encoded = (element if isinstance(element, str) else str(element)).encode("utf-8")
        parts.append(len(encoded).to_bytes(4, "little"))
        parts.append(encoded)
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor: npt.NDArray[Any]) -> npt.NDArray[np.object_]:
    """The elements of a serialized BYTES tensor, as a one-dimensional object array of bytes."""
    data = np.ascontiguousarray(encoded_tensor).data.cast("B")
    elements: list[bytes] = []
    offset = 0
    while offset < len(data):
        if offset + 4 > len(data):
            raise TritonModelException("a BYTES element's length is cut short")
        length = int.from_bytes(data[offset : offset + 4], "little")
        offset += 4
        if offset + length > len(data):
            raise TritonModelException("a BYTES element is cut short")
        elements.append(bytes(data[offset : offset + length]))
        offset += length
    result = np.empty(len(elements), dtype=np.object_)
    result[:] = elements
    return result


def _parameters_dict(parameters: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """Request or response parameters, given as a dict or as JSON text (as parameters() returns them)."""
    if isinstance(parameters, str):
        return json.loads(parameters) if parameters else {}
    return dict(parameters or {})


def checked_parameters(parameters: dict[str, Any], what: str, finite_floats: bool = False) -> dict[str, Any]:
    """Parameters a model gives, as Triton takes them (its PyParametersToJSON): str keys and
    bool, int or str values; anything else (a float, NaN, None, a numpy scalar, a list)
    raises TritonModelException with Triton's words, naming the parameter. With
    `finite_floats`, what a frame can carry: a finite float too (a KServe double, as another
    model's response may hold one), never NaN or infinity, which JSON has no word for."""
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(f"{what}: Expect parameters keys to have type str, found type {type(key)}")
        if finite_floats and isinstance(value, float) and math.isfinite(value):
            continue
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(
                f"{what} parameter '{key}': Expect parameters values to have type bool/int/str, "
                f"found type {type(value)}"
            )
    return parameters


class _DLPackCapsule:
    """Lets numpy.from_dlpack take a bare DLPack capsule (CPU memory only)."""

    def __init__(self, capsule: object) -> None:
        self._capsule = capsule

    def __dlpack__(self, stream: object = None, **_: object) -> object:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU


class Tensor:
    """A named tensor: an input of a request, or an output a model makes from a numpy array."""

    def __init__(self, name: str, data: npt.NDArray[Any], dtype: str | None = None) -> None:
        if not isinstance(data, np.ndarray):
            raise TritonModelException(f"Tensor '{name}': expected a numpy array, got {type(data).__name__}")
        if data.dtype.kind in ("S", "U"):
            data = data.astype(np.object_)
        self._name = name
        self._array = data
        self._datatype = dtype or datatype_of_numpy(data.dtype)

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> npt.NDArray[Any]:
        return self._array

    def triton_dtype(self) -> str:
        return self._datatype

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self) -> object:
        if self._array.dtype == np.object_:
            raise TritonModelException(f"Tensor '{self._name}': BYTES tensors have no DLPack form")
        return np.ascontiguousarray(self._array).__dlpack__()

    @staticmethod
    def from_dlpack(name: str, dlpack: Any) -> Tensor:
        # Any: numpy's types name the producers it knows, not a bare capsule's wrapper.
        source: Any = dlpack if hasattr(dlpack, "__dlpack__") else _DLPackCapsule(dlpack)
        try:
            return Tensor(name, np.from_dlpack(source))
        except (TypeError, RuntimeError, BufferError) as error:
            message = f"Tensor '{name}': only CPU DLPack tensors are supported here: {error}"
            raise TritonModelException(message) from error

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, {self._datatype}, shape={list(self._array.shape)})"


class InferenceResponse:
    """What execute returns per request (or a decoupled model sends): outputs or an error."""

    def __init__(
        self,
        output_tensors: list[Tensor] | None = None,
        error: TritonError | None = None,
        parameters: Mapping[str, Any] | str | None = None,
    ) -> None:
        self._outputs = list(output_tensors or [])
        for tensor in self._outputs:
            if not isinstance(tensor, Tensor):
                raise TritonModelException(
                    f"InferenceResponse: output_tensors must be pb_utils.Tensor, got {type(tensor).__name__}"
                )
        if error is not None and not isinstance(error, TritonError):
            raise TritonModelException(
                f"InferenceResponse: error must be a pb_utils.TritonError, got {type(error).__name__}"
            )
        self._error = error
        self._parameters = checked_parameters(_parameters_dict(parameters), "InferenceResponse")

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return json.dumps(self._parameters)


class InferenceResponseSender:
    """A decoupled model's way to answer a request: any number of responses, then FINAL."""

    def __init__(self, request: InferenceRequest) -> None:
        self._request = request

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException(f"send: expected a pb_utils.InferenceResponse, got {type(response).__name__}")
        if response is None and not flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            raise TritonModelException("send: a response, or flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL, is needed")
        self._request._send(response, final=bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL))

    def is_cancelled(self) -> bool:
        return self._request.is_cancelled()


class InferenceRequest:
    """A request: given to execute by the data plane, or made by a model to call another
    model of this data plane (Business Logic Scripting: exec, async_exec, stream_exec)."""

    def __init__(
        self,
        model_name: str,
        inputs: list[Tensor] | None = None,
        requested_output_names: list[str] | None = None,
        model_version: int = -1,
        flags: int = 0,
        correlation_id: int | str = 0,
        request_id: str = "",
        timeout: int = 0,
        preferred_memory: object = None,
        trace: object = None,
        parameters: Mapping[str, Any] | str | None = None,
    ) -> None:
        self._model_name = model_name
        self._model_version = model_version
        self._inputs = list(inputs or [])
        self._requested = list(requested_output_names or [])
        self._flags = flags
        self._correlation_id = correlation_id
        self._request_id = request_id
        self._timeout = timeout
        self._parameters = checked_parameters(_parameters_dict(parameters), "InferenceRequest")
        # Set for the requests the data plane hands to execute.
        self._handle: _RequestHandle | None = None

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def timeout(self) -> int:
        return self._timeout

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def parameters(self) -> str:
        return json.dumps(self._parameters)

    def requested_output_names(self) -> list[str]:
        return list(self._requested)

    def is_cancelled(self) -> bool:
        return self._handle is not None and self._handle.cancelled

    def get_response_sender(self) -> InferenceResponseSender:
        if self._handle is None or not self._handle.decoupled:
            raise TritonModelException(
                "get_response_sender: only a decoupled model (model_transaction_policy { decoupled: true }) has one"
            )
        return InferenceResponseSender(self)

    def _send(self, response: InferenceResponse | None, final: bool) -> None:
        _the_host().send_response(self._handle, response, final)

    def exec(self, decoupled: bool = False) -> Any:
        """Runs this request on a model of the data plane; waits for its response (or, with
        decoupled=True, returns an iterator of the responses of a decoupled model). Typed Any,
        as the two answers differ (an InferenceResponse, or an iterator of them)."""
        responses = _the_host().bls(self, stream=decoupled)
        if decoupled:
            return responses
        gathered = list(responses)
        if len(gathered) != 1:
            return InferenceResponse(error=TritonError(f"expected one response, got {len(gathered)}"))
        return gathered[0]

    def stream_exec(self) -> Iterator[InferenceResponse]:
        """The responses of a decoupled model, as they arrive."""
        responses: Iterator[InferenceResponse] = self.exec(decoupled=True)
        return responses

    async def async_exec(self, decoupled: bool = False) -> Any:
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(None, lambda: self.exec(decoupled))

    def set_release_flags(self, flags: int) -> None:
        raise TritonModelException("request rescheduling (set_release_flags) is not supported by this data plane")


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    return _config_by_name(model_config, "input", name)


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    return _config_by_name(model_config, "output", name)


def _config_by_name(model_config: dict[str, Any], kind: str, name: str) -> dict[str, Any] | None:
    tensors: list[dict[str, Any]] = model_config.get(kind, [])
    for tensor in tensors:
        if tensor.get("name") == name:
            return tensor
    return None


class Logger:
    """Log lines that go to the data plane's JSON log, with the model's name."""

    class LogLevel:
        INFO = "info"
        WARNING = "warn"
        ERROR = "error"
        VERBOSE = "debug"

    @staticmethod
    def log(message: object, level: str = LogLevel.INFO) -> None:
        if _host is not None:
            _host.log(level, str(message))

    @staticmethod
    def log_info(message: object) -> None:
        Logger.log(message, Logger.LogLevel.INFO)

    @staticmethod
    def log_warn(message: object) -> None:
        Logger.log(message, Logger.LogLevel.WARNING)

    @staticmethod
    def log_error(message: object) -> None:
        Logger.log(message, Logger.LogLevel.ERROR)

    @staticmethod
    def log_verbose(message: object) -> None:
        Logger.log(message, Logger.LogLevel.VERBOSE)


class ModelConfig:
    """What auto_complete_config(auto_complete_model_config) is given: the config as Triton's
    JSON, and the setters Triton documents. Declared tensors are not declared twice."""

    def __init__(self, model_config: dict[str, Any]) -> None:
        self._config = model_config

    def as_dict(self) -> dict[str, Any]:
        return self._config

    def _add_tensor(self, kind: str, tensor: dict[str, Any]) -> None:
        if not isinstance(tensor, dict) or "name" not in tensor:
            raise TritonModelException(f"add_{kind}: a dict with at least 'name' is needed")
        tensors: list[dict[str, Any]] = self._config.setdefault(kind, [])
        for existing in tensors:
            if existing.get("name") == tensor["name"]:
                _merge_declared(kind, existing, tensor)
                return
        entry = dict(tensor)
        if "data_type" in entry and not str(entry["data_type"]).startswith("TYPE_"):
            entry["data_type"] = "TYPE_" + entry["data_type"]
        tensors.append(entry)

    def add_input(self, input: dict[str, Any]) -> None:
        self._add_tensor("input", input)

    def add_output(self, output: dict[str, Any]) -> None:
        self._add_tensor("output", output)

    def set_max_batch_size(self, max_batch_size: int) -> None:
        current = self._config.get("max_batch_size", 0)
        if current and current != max_batch_size:
            raise TritonModelException(
                f"set_max_batch_size: config.pbtxt sets max_batch_size {current}, the model asks for {max_batch_size}"
            )
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        self._config.setdefault("model_transaction_policy", {}).update(transaction_policy_dict)

    def add_parameter(self, key: str, value: object) -> None:
        self._config.setdefault("parameters", {})[key] = {"string_value": str(value)}


def _merge_declared(kind: str, existing: dict[str, Any], tensor: dict[str, Any]) -> None:
    """Fills in what config.pbtxt left out of a tensor it declares; a data type or dims it
    set otherwise is an error."""
    for key, value in tensor.items():
        declared = existing.get(key)
        if key in ("data_type", "dims") and declared not in (None, value, [], "", 0, "TYPE_INVALID"):
            raise TritonModelException(
                f"add_{kind}: '{tensor['name']}' is declared in config.pbtxt with a different {key}"
            )
        existing.setdefault(key, value)


class MetricFamily:
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"

    def __init__(self, *_: object, **__: object) -> None:
        raise TritonModelException("custom metrics (pb_utils.MetricFamily) are not supported by this data plane")


def load_model(*_: object, **__: object) -> None:
    raise TritonModelException("loading models from a model (pb_utils.load_model) is not supported by this data plane")


def unload_model(*_: object, **__: object) -> None:
    raise TritonModelException(
        "unloading models from a model (pb_utils.unload_model) is not supported by this data plane"
    )
