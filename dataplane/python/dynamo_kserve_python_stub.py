"""Hosts one instance of a Triton Python-backend model (`model.py`) for dynamo-kserve's
`python` engine (dataplane/src/engines/python/).

The data plane starts one of these per model instance. Messages travel as frames on two
file descriptors the data plane opens for it (3: to this process, 4: from it), so that
whatever the model prints on stdout or stderr stays out of the protocol (the data plane
logs those lines). A frame is: header length and payload length (uint32, little endian),
a JSON header (a message of stub_protocol.py, named by its `kind`), then the payload
holding tensor bytes. Large input tensors are not in the payload but in a shared-memory
file the data plane writes and this process maps once: numpy arrays are made over it
without a copy; large outputs go back the same way, through a second file.

Usage: dynamo_kserve_python_stub.py serve  (settings come in the first frame)
       dynamo_kserve_python_stub.py complete <model.py>  (Triton's auto-complete: the config
       as Triton's JSON on stdin, the completed config written to file descriptor 3)
"""

# Annotations stay text: stub_protocol's TypedDicts are imported for the type checker only,
# so the stub runs on any interpreter that ran it before they were written.
from __future__ import annotations

import ctypes
import importlib.util
import json
import mmap
import os
import queue
import signal
import struct
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, cast


def exit_with_parent() -> None:
    """Ends this process as soon as the data plane that started it is gone, even while the
    model's execute or initialize is busy or a thread it started (daemon or not) runs, as
    Triton's stub does: Linux kills it with the parent (PR_SET_PDEATHSIG), and a watchdog
    thread notices a new parent elsewhere, or the data plane gone while a wrapper (a --python
    script that does not exec) lives on as the parent. Set before anything slow (numpy's import)."""
    parent = os.getppid()
    # Started through a wrapper, the parent is the wrapper; either way, a data plane already
    # gone when this process got here is caught before the watchdog starts.
    started_by = int(os.environ.get("DYNAMO_KSERVE_PARENT_PID") or parent)

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass  # alive, another user's
        return True

    if not alive(started_by):
        os._exit(1)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (AttributeError, OSError):
        pass  # not Linux: the watchdog alone

    def watch() -> None:
        while True:
            if os.getppid() != parent or not alive(started_by):
                os._exit(1)
            time.sleep(0.1)

    # The parent may have gone before prctl took effect: the watchdog's first look catches it.
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


exit_with_parent()

import numpy as np  # noqa: E402  (after the guard: importing numpy takes a while)
import triton_python_backend_utils as pb_utils  # noqa: E402

if TYPE_CHECKING:
    import io
    from collections.abc import Callable, Iterator, Sequence

    import numpy.typing as npt
    from stub_protocol import (
        CallMessage,
        CallResponseMessage,
        CancelMessage,
        ErrorReply,
        ExecuteMessage,
        FreeOutputsMessage,
        FromStubMessage,
        InputTensor,
        JsonObject,
        OutputTensor,
        ResponseMessage,
        SettingsMessage,
    )

    # A request for execute as it waits: its handle, its message, the frame's payload.
    WorkItem = tuple["RequestHandle", ExecuteMessage, bytearray]
    # A model's TritonPythonModel instance: the model's own code, typed as it pleases.
    Model = Any

FROM_DATAPLANE = 3
TO_DATAPLANE = 4
# In `complete` mode: where the completed config goes (stdout is the model's).
COMPLETED_CONFIG = 3
FRAME_HEAD = struct.Struct("<II")

_ERROR_CODE_NAMES = {
    pb_utils.TritonError.UNKNOWN: "UNKNOWN",
    pb_utils.TritonError.INTERNAL: "INTERNAL",
    pb_utils.TritonError.NOT_FOUND: "NOT_FOUND",
    pb_utils.TritonError.INVALID_ARG: "INVALID_ARG",
    pb_utils.TritonError.UNAVAILABLE: "UNAVAILABLE",
    pb_utils.TritonError.UNSUPPORTED: "UNSUPPORTED",
    pb_utils.TritonError.ALREADY_EXISTS: "ALREADY_EXISTS",
    pb_utils.TritonError.CANCELLED: "CANCELLED",
}
_ERROR_CODE_OF_NAME = {name: code for code, name in _ERROR_CODE_NAMES.items()}


class Channel:
    """Frames in both directions; writes from any thread, one frame at a time.

    Responses the main loop writes may be held back briefly and sent together (`hold`):
    while more requests are queued, a model's answers leave in one write instead of one
    each, so the data plane reads them in one go and sends its next requests in one write
    too. Held frames leave when the queue runs dry (flush), at HOLD_BYTES, before any frame
    that is not held, and at the latest HOLD_SECONDS after the first was held (a flusher
    thread), so a slow execute never keeps an earlier answer waiting longer than that.
    """

    HOLD_BYTES = 256 * 1024
    HOLD_SECONDS = 0.001
    # os.writev takes at most IOV_MAX (1024 on Linux) buffers a call.
    MOST_BUFFERS = 1024

    def __init__(self) -> None:
        self._reader = cast("io.BufferedReader", os.fdopen(FROM_DATAPLANE, "rb", buffering=1 << 16))
        self._out = TO_DATAPLANE
        self._write_lock = threading.Lock()
        self._held: list[bytes | memoryview] = []
        self._held_bytes = 0
        self._held_since = 0.0
        self._holding = threading.Condition(self._write_lock)
        self._flusher: threading.Thread | None = None

    def read(self) -> tuple[JsonObject, bytearray] | None:
        """The next frame (its message, its payload), or None when the data plane is gone."""
        head = self._reader.read(FRAME_HEAD.size)
        if len(head) < FRAME_HEAD.size:
            return None
        header_length, payload_length = FRAME_HEAD.unpack(head)
        message: JsonObject = json.loads(self._reader.read(header_length))
        payload = bytearray(payload_length)
        view = memoryview(payload)
        received = 0
        while received < payload_length:
            count = self._reader.readinto(view[received:])
            if not count:
                return None
            received += count
        return message, payload

    @staticmethod
    def encode(message: FromStubMessage) -> bytes:
        """A message as the frame carries it; raises (ValueError, TypeError) for one JSON cannot
        carry: allow_nan=False, as a bare NaN is not JSON and the data plane could not read it."""
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode()

    def write(self, message: FromStubMessage, parts: Sequence[memoryview] = (), hold: bool = False) -> None:
        self.write_encoded(self.encode(message), parts, hold)

    def write_encoded(self, encoded: bytes, parts: Sequence[memoryview] = (), hold: bool = False) -> None:
        size = sum(part.nbytes for part in parts)
        buffers: list[bytes | memoryview] = [FRAME_HEAD.pack(len(encoded), size), encoded, *parts]
        with self._write_lock:
            if hold:
                if not self._held:
                    self._held_since = time.monotonic()
                    self._start_flusher()
                self._held += buffers
                self._held_bytes += FRAME_HEAD.size + len(encoded) + size
                if self._held_bytes < self.HOLD_BYTES and len(self._held) < self.MOST_BUFFERS:
                    return
                buffers = []
            self._write_held_and(buffers)

    def flush(self) -> None:
        """Sends the frames held back, if any."""
        if self._held:
            with self._write_lock:
                self._write_held_and([])

    def _write_held_and(self, buffers: list[bytes | memoryview]) -> None:
        """Writes the held frames, then `buffers` (the write lock held)."""
        if self._held:
            buffers = self._held + buffers
            self._held = []
            self._held_bytes = 0
        while buffers:
            written = os.writev(self._out, buffers[: self.MOST_BUFFERS])
            while buffers and written >= len(buffers[0]):
                written -= len(buffers[0])
                buffers.pop(0)
            if buffers and written:
                buffers[0] = memoryview(buffers[0])[written:]

    def _start_flusher(self) -> None:
        """Wakes the flusher thread (started on first use) for the frames just held."""
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_late, name="held-frames", daemon=True)
            self._flusher.start()
        self._holding.notify()

    def _flush_late(self) -> None:
        with self._write_lock:
            while True:
                if not self._held:
                    self._holding.wait()
                    continue
                late = self._held_since + self.HOLD_SECONDS - time.monotonic()
                if late > 0:
                    self._holding.wait(late)
                else:
                    self._write_held_and([])


def tensors_from(
    described: Sequence[InputTensor], payload: bytearray, shared: mmap.mmap | None
) -> list[pb_utils.Tensor]:
    """pb_utils.Tensors over the frame's payload or the shared-memory file (no copies but BYTES)."""
    tensors = []
    for tensor in described:
        name, datatype, offset, size = tensor["name"], tensor["datatype"], tensor["offset"], tensor["byteSize"]
        source: bytearray | mmap.mmap = payload
        if tensor["inSharedMemory"]:
            if shared is None:
                raise pb_utils.TritonModelException(f"input '{name}': in shared memory, but this process has none")
            source = shared
        array: npt.NDArray[Any]
        if datatype == "BYTES":
            array = pb_utils.deserialize_bytes_tensor(np.frombuffer(source, np.uint8, size, offset))
        elif datatype == "BF16":
            raise pb_utils.TritonModelException(f"input '{name}': BF16 has no numpy type")
        else:
            dtype = np.dtype(pb_utils.triton_string_to_numpy(datatype))
            array = np.frombuffer(source, dtype, size // dtype.itemsize, offset)
        tensors.append(pb_utils.Tensor(name, array.reshape(tensor["shape"]), datatype))
    return tensors


# Outputs this large go through shared memory (when there is room); smaller ones in the frame.
SHARED_MEMORY_FROM = 64 * 1024
ALIGNMENT = 64


class SharedOutputs:
    """The shared-memory file large outputs go through: this process copies an output into a
    free region, the data plane reads it as the response arrives and says when it is free.
    Regions are handed out as a ring, as the data plane's own for inputs."""

    def __init__(self, descriptor: int, size: int) -> None:
        self.map = mmap.mmap(descriptor, size)
        self.size = size
        self.regions: list[list[Any]] = []  # [offset, freed], oldest first
        self.head = 0
        self.lock = threading.Lock()

    def put(self, data: npt.NDArray[np.uint8]) -> int | None:
        """The offset `data` (a uint8 array) was copied to, or None when there is no room."""
        length = max(ALIGNMENT, -(-data.nbytes // ALIGNMENT) * ALIGNMENT)
        with self.lock:
            offset = self._free_offset(length)
            if offset is None:
                return None
            self.regions.append([offset, False])
            self.head = offset + length
        self.map[offset : offset + data.nbytes] = data.data
        return offset

    def _free_offset(self, length: int) -> int | None:
        """Where `length` bytes fit: after the newest region, or wrapped before the oldest."""
        if not self.regions:
            return 0 if length <= self.size else None
        oldest: int = self.regions[0][0]
        if self.head > oldest:
            if self.head + length <= self.size:
                return self.head
            return 0 if length <= oldest else None
        return self.head if self.head + length <= oldest else None

    def free(self, offset: int) -> None:
        with self.lock:
            for region in self.regions:
                if region[0] == offset and not region[1]:
                    region[1] = True
                    break
            while self.regions and self.regions[0][1]:
                self.regions.pop(0)
            if not self.regions:
                self.head = 0


def sequence_parameters(request: pb_utils.InferenceRequest) -> dict[str, Any]:
    """A BLS request's correlation_id and flags as the request parameters that carry them
    (sequence_id, sequence_start, sequence_end): Triton's Python backend gives them to the
    called model, whose sequence batcher needs them; none for correlation ID 0 or ""."""
    correlation_id = request.correlation_id()
    if correlation_id in (0, ""):
        return {}
    flags = request.flags()
    parameters: dict[str, Any] = {"sequence_id": correlation_id}
    if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
        parameters["sequence_start"] = True
    if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
        parameters["sequence_end"] = True
    return parameters


def described_outputs(
    tensors: Sequence[pb_utils.Tensor], shared: SharedOutputs | None = None
) -> tuple[list[OutputTensor], list[memoryview]]:
    """Outputs as the data plane reads them, and the bytes of those that go in the frame (the
    others were put in shared memory: their description says where)."""
    described: list[OutputTensor] = []
    parts: list[memoryview] = []
    try:
        for tensor in tensors:
            array = tensor.as_numpy()
            data = (
                pb_utils.serialize_byte_tensor(array)
                if tensor.triton_dtype() == "BYTES"
                else np.ascontiguousarray(array)
            )
            entry: OutputTensor = {
                "name": tensor.name(),
                "datatype": tensor.triton_dtype(),
                "shape": list(array.shape),
                "byteSize": data.nbytes,
            }
            flat = data.reshape(-1).view(np.uint8) if data.nbytes else np.empty(0, np.uint8)
            offset = shared.put(flat) if shared is not None and data.nbytes >= SHARED_MEMORY_FROM else None
            if offset is None:
                parts.append(flat.data)
            else:
                entry["sharedOffset"] = offset
            described.append(entry)
    except BaseException:
        # The data plane frees only the regions a response it reads describes.
        free_placed(described, shared)
        raise
    return described, parts


def free_placed(described: Sequence[OutputTensor], shared: SharedOutputs | None) -> None:
    """Frees the regions of shared memory that outputs described by described_outputs took."""
    for entry in described:
        if "sharedOffset" in entry and shared is not None:
            shared.free(entry["sharedOffset"])


def in_payload(described: Sequence[OutputTensor]) -> list[InputTensor]:
    """Tensors described as outputs, one after the other in a frame's payload, as inputs
    tensors_from reads (the tensors of a call to another model, or of its responses)."""
    placed: list[InputTensor] = []
    offset = 0
    for tensor in described:
        name, datatype, shape, size = tensor["name"], tensor["datatype"], tensor["shape"], tensor["byteSize"]
        placed.append(
            {
                "name": name,
                "datatype": datatype,
                "shape": shape,
                "offset": offset,
                "byteSize": size,
                "inSharedMemory": False,
            }
        )
        offset += size
    return placed


def error_response(message: str, code: int = pb_utils.TritonError.INTERNAL) -> pb_utils.InferenceResponse:
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code))


def error_of(error: BaseException) -> ErrorReply:
    if isinstance(error, pb_utils.TritonError):
        return {"code": _ERROR_CODE_NAMES.get(error.code(), "INTERNAL"), "message": error.message()}
    return {"code": "INTERNAL", "message": str(error)}


class RequestHandle:
    """What the data plane knows of one request given to execute."""

    __slots__ = ("cancelled", "decoupled", "finished", "id")

    def __init__(self, request_id: int, decoupled: bool) -> None:
        self.id = request_id
        self.decoupled = decoupled
        self.cancelled = False
        self.finished = False


class Host:
    """What triton_python_backend_utils asks of the data plane."""

    def __init__(self, channel: Channel, shared_outputs: SharedOutputs | None = None) -> None:
        self.channel = channel
        self.shared_outputs = shared_outputs
        self.running: dict[int, RequestHandle] = {}
        self.calls: dict[int, queue.Queue[tuple[CallResponseMessage, bytearray]]] = {}
        self.next_call = 0
        self.lock = threading.Lock()

    def send_response(
        self, handle: RequestHandle, response: pb_utils.InferenceResponse | None, final: bool, hold: bool = False
    ) -> None:
        """Sends a response of the request; one that cannot be sent (a parameter JSON cannot
        carry, an output numpy cannot give as bytes) becomes that request's final error, as
        Triton fails a response it cannot build, and the process goes on serving."""
        if handle.finished:
            raise pb_utils.TritonModelException("this request's final response was already sent")
        message: ResponseMessage = {"kind": "response", "id": handle.id, "final": final}
        parts: Sequence[memoryview] = ()
        try:
            message, parts = self._response_message(handle, response, final)
            encoded = self.channel.encode(message)
        except Exception as error:
            # The error frame describes no outputs: the regions they took are freed here.
            free_placed(message.get("outputs", ()), self.shared_outputs)
            text = error.message() if isinstance(error, pb_utils.TritonModelException) else str(error)
            failure: ResponseMessage = {
                "kind": "response",
                "id": handle.id,
                "final": True,
                "error": {"code": "INTERNAL", "message": f"the model's response cannot be sent: {text}"},
            }
            encoded, parts, final = self.channel.encode(failure), (), True
        if final:
            handle.finished = True
            self.running.pop(handle.id, None)
        self.channel.write_encoded(encoded, parts, hold)

    def _response_message(
        self, handle: RequestHandle, response: pb_utils.InferenceResponse | None, final: bool
    ) -> tuple[ResponseMessage, list[memoryview]]:
        message: ResponseMessage = {"kind": "response", "id": handle.id, "final": final}
        parts: list[memoryview] = []
        if response is not None:
            if response._parameters:
                # Checked as Triton does when the response was built; here, that the frame can
                # carry them (a model may have changed them since, or return a BLS response).
                # Before the outputs: a refused response takes no shared memory.
                message["parameters"] = pb_utils.checked_parameters(
                    response._parameters, "response", finite_floats=True
                )
            error = response.error()
            if error is not None:
                message["error"] = error_of(error)
            else:
                message["outputs"], parts = described_outputs(response.output_tensors(), self.shared_outputs)
        return message, parts

    def bls(self, request: pb_utils.InferenceRequest, stream: bool) -> Iterator[pb_utils.InferenceResponse]:
        answers: queue.Queue[tuple[CallResponseMessage, bytearray]] = queue.Queue()
        with self.lock:
            self.next_call += 1
            call = self.next_call
            self.calls[call] = answers
        described, parts = described_outputs(request.inputs())
        version = request.model_version()
        message: CallMessage = {
            "kind": "call",
            "id": call,
            "model": request.model_name(),
            "version": "" if version in (-1, "", None) else str(version),
            "inputs": in_payload(described),
            "requestedOutputs": request.requested_output_names(),
            "parameters": {
                **pb_utils.checked_parameters(request._parameters, "BLS request"),
                **sequence_parameters(request),
            },
            "requestId": request.request_id(),
            "stream": stream,
            "timeoutUs": request.timeout(),
        }
        self.channel.write(message, parts)
        return self._answers(call, answers)

    def _answers(
        self, call: int, answers: queue.Queue[tuple[CallResponseMessage, bytearray]]
    ) -> Iterator[pb_utils.InferenceResponse]:
        try:
            while True:
                message, payload = answers.get()
                if "error" in message:
                    error = message["error"]
                    code = _ERROR_CODE_OF_NAME.get(error["code"], pb_utils.TritonError.INTERNAL)
                    yield error_response(error["message"], code)
                elif "outputs" in message:
                    tensors = tensors_from(in_payload(message["outputs"]), payload, None)
                    response = pb_utils.InferenceResponse(output_tensors=tensors)
                    # The called model's parameters as they came (a KServe double included).
                    response._parameters = message.get("parameters") or {}
                    yield response
                if message["final"]:
                    return
        finally:
            with self.lock:
                self.calls.pop(call, None)

    def bls_answer(self, message: CallResponseMessage, payload: bytearray) -> None:
        answers = self.calls.get(message["id"])
        if answers is not None:
            answers.put((message, payload))

    def log(self, level: str, message: str) -> None:
        self.channel.write({"kind": "log", "level": level, "message": message})


def load_model_module(path: str) -> type[Model]:
    folder = os.path.dirname(path)
    # As Triton: the model's own modules next to model.py are importable.
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("model", path)
    if spec is None or spec.loader is None:
        raise pb_utils.TritonModelException(f"{path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules["model"] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "TritonPythonModel"):
        raise pb_utils.TritonModelException(f"{path} defines no class TritonPythonModel")
    model_class: type[Model] = module.TritonPythonModel
    return model_class


def yield_to_the_dataplane() -> None:
    """Runs this process (and the threads it starts) as batch work (Linux SCHED_BATCH, no
    privilege needed): woken by a request, it does not preempt the data plane's event loop
    where the two share a core, so the data plane finishes its turn (the other requests it
    has, its replies) and the model then takes what arrived in one go, instead of the two
    trading the core once per request. Where a core is free nothing changes."""
    try:
        # Every thread there is (numpy's BLAS started its own at import); later ones inherit it.
        for thread in os.listdir("/proc/self/task"):
            os.sched_setscheduler(int(thread), os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass  # not Linux, or a sandbox that forbids it: the default policy serves as well, slower


def map_shared_memory(settings: SettingsMessage) -> tuple[mmap.mmap | None, SharedOutputs | None]:
    """The shared memory for inputs and for outputs. The files come as inherited descriptors
    of files already unlinked: nothing is left behind whenever this process or the data plane
    is killed. Once mapped, the mappings hold the files."""
    inputs_fd, outputs_fd, size = settings["sharedInputsFd"], settings["sharedOutputsFd"], settings["pythonShmByteSize"]
    shared = mmap.mmap(inputs_fd, size) if inputs_fd else None
    shared_outputs = SharedOutputs(outputs_fd, size) if outputs_fd else None
    for descriptor in (inputs_fd, outputs_fd):
        if descriptor:
            os.close(descriptor)
    return shared, shared_outputs


def initialized_model(settings: SettingsMessage, channel: Channel) -> Model | None:
    """The model's TritonPythonModel, initialized; None (the data plane told why) when it fails."""
    try:
        model = load_model_module(settings["file"])()
        if hasattr(model, "initialize"):
            model.initialize(settings["args"])
    except BaseException:
        channel.write({"kind": "fatal", "message": traceback.format_exc(limit=8)})
        return None
    return model


class Dispatcher:
    """Reads the data plane's messages (a thread of its own, so that a busy execute still
    learns of cancellations, answers to its calls and health checks) and acts on each: a
    request for execute is queued for the executor."""

    def __init__(
        self, channel: Channel, host: Host, work: queue.Queue[WorkItem | None], settings: SettingsMessage
    ) -> None:
        self.channel = channel
        self.host = host
        self.work = work
        self.decoupled = settings["decoupled"]
        self.finished = False
        self.actions: dict[str, Callable[[Any, bytearray], None]] = {
            "execute": self.execute,
            "cancel": self.cancel,
            "callResponse": self.host.bls_answer,
            "freeOutputs": self.free_outputs,
            "ping": lambda _message, _payload: self.channel.write({"kind": "pong"}),
            "finish": lambda _message, _payload: self.finish(),
        }

    def run(self) -> None:
        while not self.finished:
            frame = self.channel.read()
            if frame is None:
                self.finish()
                return
            message, payload = frame
            action = self.actions.get(message["kind"])
            if action is not None:
                action(message, payload)

    def execute(self, message: ExecuteMessage, payload: bytearray) -> None:
        handle = RequestHandle(message["id"], self.decoupled)
        self.host.running[handle.id] = handle
        self.work.put((handle, message, payload))

    def cancel(self, message: CancelMessage, _payload: bytearray) -> None:
        handle = self.host.running.get(message["id"])
        if handle is not None:
            handle.cancelled = True

    def free_outputs(self, message: FreeOutputsMessage, _payload: bytearray) -> None:
        shared_outputs = self.host.shared_outputs
        if shared_outputs is not None:
            for offset in message["offsets"]:
                shared_outputs.free(offset)

    def finish(self) -> None:
        self.finished = True
        self.work.put(None)


def described_exception(error: BaseException) -> str:
    """An exception as Triton words it: `Type: message`, then where it was raised, innermost
    first (the stub's own frame left out)."""
    frames = traceback.extract_tb(error.__traceback__)[1:]
    where = "".join(f"  {frame.filename}({frame.lineno}): {frame.name}\n" for frame in reversed(frames))
    return f"{type(error).__name__}: {error}\n\nAt:\n{where}"


class Executor:
    """Runs the model's execute on each execution the data plane's scheduler formed (a batch
    of requests, or one) and answers its requests as Triton does. Batches are formed by the
    data plane (dataplane/src/scheduling/): this process runs exactly the requests it is
    given as one execution, in their order, one execution at a time."""

    def __init__(self, model: Model, host: Host, shared: mmap.mmap | None, settings: SettingsMessage) -> None:
        self.model = model
        self.host = host
        self.shared = shared
        self.decoupled = settings["decoupled"]
        args = settings["args"]
        self.model_name = args["model_name"]
        self.model_version = int(args["model_version"])
        # For error messages: the instance this process hosts.
        self.instance_name = args["model_instance_name"]

    def run(self, work: queue.Queue[WorkItem | None]) -> None:
        """Executes executions until the data plane says finish (or is gone)."""
        while True:
            # Answers held back leave before the loop waits: at once when no request is queued.
            if work.empty():
                self.host.channel.flush()
            execution = next_execution(work)
            if execution is None:
                break
            requests = [request for request in map(self.request_of, execution) if request is not None]
            if requests:
                self.execute(requests)
            if self.decoupled:
                # Its responses may still come from the model's threads: the data plane may
                # give this instance its next execution meanwhile, as Triton does.
                self.host.channel.write({"kind": "executed", "id": execution[-1][0].id})
        self.host.channel.flush()

    def request_of(self, item: WorkItem) -> pb_utils.InferenceRequest | None:
        """The request execute is given; None for one already answered (cancelled, or with
        inputs that cannot be read)."""
        handle, message, payload = item
        if handle.cancelled:
            self.fail(handle, error_response("request cancelled", pb_utils.TritonError.CANCELLED))
            return None
        try:
            inputs = tensors_from(message["inputs"], payload, self.shared)
        except Exception as error:
            self.fail(handle, error_response(str(error)))
            return None
        request = pb_utils.InferenceRequest(
            self.model_name,
            inputs,
            message["requestedOutputs"],
            model_version=self.model_version,
            flags=message["flags"],
            correlation_id=message["correlationId"],
            request_id=message["requestId"],
        )
        # The client's parameters as they came (a KServe double included): Triton checks
        # only what a model builds.
        request._parameters = message["parameters"]
        request._handle = handle
        return request

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> None:
        try:
            responses = self.model.execute(requests)
        except Exception as error:
            # As Triton: an exception fails every request of the call still unanswered.
            failure = error_response(
                f"Failed to process the request(s) for model '{self.instance_name}', "
                f"message: {described_exception(error)}"
            )
            self.fail_unanswered(requests, failure, hold=True)
            return
        if self.decoupled:
            if responses is not None:
                failure = error_response(
                    "a decoupled model's execute must return None and answer through the response sender"
                )
                self.fail_unanswered(requests, failure)
            return
        if not isinstance(responses, (list, tuple)) or len(responses) != len(requests):
            count = len(responses) if isinstance(responses, (list, tuple)) else type(responses).__name__
            failure = error_response(
                f"execute must return one InferenceResponse per request: {len(requests)} requests, got {count}"
            )
            for request in requests:
                self.fail(handle_of(request), failure, hold=True)
            return
        # Of the same length, checked above.
        for request, response in zip(requests, responses):
            self.answer(handle_of(request), response)

    def answer(self, handle: RequestHandle, response: object) -> None:
        """Sends what execute returned for a request: an InferenceResponse, else an error."""
        if not isinstance(response, pb_utils.InferenceResponse):
            response = error_response(f"execute returned {type(response).__name__}, not an InferenceResponse")
        try:
            self.host.send_response(handle, response, True, hold=True)
        except pb_utils.TritonModelException as error:
            self.fail(handle, error_response(error.message()), hold=True)

    def fail_unanswered(
        self, requests: list[pb_utils.InferenceRequest], failure: pb_utils.InferenceResponse, hold: bool = False
    ) -> None:
        for request in requests:
            handle = handle_of(request)
            if not handle.finished:
                self.fail(handle, failure, hold)

    def fail(self, handle: RequestHandle, failure: pb_utils.InferenceResponse, hold: bool = False) -> None:
        self.host.send_response(handle, failure, True, hold=hold)


def next_execution(work: queue.Queue[WorkItem | None]) -> list[WorkItem] | None:
    """The requests of the next execution: those up to one that ends it (the data plane writes
    them together); None when the instance is to finish."""
    execution: list[WorkItem] = []
    while not execution or not execution[-1][1]["endsExecution"]:
        item = work.get()
        if item is None:
            return None
        execution.append(item)
    return execution


def handle_of(request: pb_utils.InferenceRequest) -> RequestHandle:
    """The handle the stub gave a request for execute."""
    return cast("RequestHandle", request._handle)


def finalize(model: Model) -> None:
    if hasattr(model, "finalize"):
        try:
            model.finalize()
        except Exception:
            traceback.print_exc()


def serve(channel: Channel, settings: SettingsMessage) -> int:
    """Loads and initializes the model, then executes what the data plane sends until it says
    finish; 1 when the model fails to load (the data plane was told why)."""
    yield_to_the_dataplane()
    shared, shared_outputs = map_shared_memory(settings)
    host = Host(channel, shared_outputs)
    pb_utils._host = host
    model = initialized_model(settings, channel)
    if model is None:
        return 1
    work: queue.Queue[WorkItem | None] = queue.Queue()
    dispatcher = Dispatcher(channel, host, work, settings)
    threading.Thread(target=dispatcher.run, name="dataplane-reader", daemon=True).start()
    channel.write({"kind": "ready"})
    Executor(model, host, shared, settings).run(work)
    finalize(model)
    channel.write({"kind": "bye"})
    return 0


def complete(path: str) -> int:
    """Triton's auto-complete: the model's static auto_complete_config(auto_complete_model_config)
    fills in the config it is given and returns it. A model without one keeps its config."""
    config = json.load(sys.stdin)
    model_class = load_model_module(path)
    completer = getattr(model_class, "auto_complete_config", None)
    if completer is not None:
        try:
            completed = completer(pb_utils.ModelConfig(config))
        except Exception as error:
            # What the data plane reports as the reason the model is not loaded.
            print(described_exception(error), file=sys.stderr)
            return 1
        if not isinstance(completed, pb_utils.ModelConfig):
            returned = type(completed).__name__
            print(f"auto_complete_config must return the ModelConfig it was given, not {returned}", file=sys.stderr)
            return 1
        config = completed.as_dict()
    with os.fdopen(COMPLETED_CONFIG, "w") as result:
        json.dump(config, result)
    return 0


def main() -> int:
    if sys.argv[1:2] == ["complete"] and len(sys.argv) == 3:
        return complete(sys.argv[2])
    channel = Channel()
    frame = channel.read()
    if frame is None:
        return 1
    return serve(channel, cast("SettingsMessage", frame[0]))


if __name__ == "__main__":
    sys.exit(main())
