"""Hosts one instance of a Triton Python-backend model (`model.py`) for dynamo-kserve's
`python` engine (dataplane/src/engines/python/).

The data plane starts one of these per model instance. Messages travel as frames on two
file descriptors the data plane opens for it (3: to this process, 4: from it), so that
whatever the model prints on stdout or stderr stays out of the protocol (the data plane
logs those lines). A frame is: header length and payload length (uint32, little endian),
a JSON header, then the payload holding tensor bytes. Large input tensors are not in the
payload but in a shared-memory file the data plane writes and this process maps once:
numpy arrays are made over it without a copy.

Usage: dynamo_kserve_python_stub.py serve  (settings come in the first frame)
       dynamo_kserve_python_stub.py complete <model.py>  (Triton's auto-complete: the config
       as Triton's JSON on stdin, the completed config written to file descriptor 3)
"""

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
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
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

FROM_DATAPLANE = 3
TO_DATAPLANE = 4
# In `complete` mode: where the completed config goes (stdout is the model's).
COMPLETED_CONFIG = 3
FRAME_HEAD = struct.Struct("<II")
# Where an input tensor's bytes are: in the frame's payload, or in the shared-memory file.
IN_PAYLOAD, IN_SHARED_MEMORY = 0, 1
# The instance this process hosts (args["model_instance_name"]), for error messages.
INSTANCE_NAME = ""

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

    def __init__(self):
        self._reader = os.fdopen(FROM_DATAPLANE, "rb", buffering=1 << 16)
        self._out = TO_DATAPLANE
        self._write_lock = threading.Lock()
        self._held = []
        self._held_bytes = 0
        self._held_since = 0.0
        self._holding = threading.Condition(self._write_lock)
        self._flusher = None

    def read(self):
        """The next frame (header dict, payload bytearray), or None when the data plane is gone."""
        head = self._reader.read(FRAME_HEAD.size)
        if len(head) < FRAME_HEAD.size:
            return None
        header_length, payload_length = FRAME_HEAD.unpack(head)
        header = json.loads(self._reader.read(header_length))
        payload = bytearray(payload_length)
        view = memoryview(payload)
        received = 0
        while received < payload_length:
            count = self._reader.readinto(view[received:])
            if not count:
                return None
            received += count
        return header, payload

    @staticmethod
    def encode(header: dict) -> bytes:
        """A header as the frame carries it; raises (ValueError, TypeError) for one JSON cannot
        carry: allow_nan=False, as a bare NaN is not JSON and the data plane could not read it."""
        return json.dumps(header, separators=(",", ":"), allow_nan=False).encode()

    def write(self, header, parts=(), hold=False):
        self.write_encoded(self.encode(header), parts, hold)

    def write_encoded(self, encoded: bytes, parts=(), hold: bool = False) -> None:
        parts = [memoryview(part).cast("B") for part in parts]
        size = sum(len(part) for part in parts)
        buffers = [FRAME_HEAD.pack(len(encoded), size), encoded, *parts]
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

    def flush(self):
        """Sends the frames held back, if any."""
        if self._held:
            with self._write_lock:
                self._write_held_and([])

    def _write_held_and(self, buffers):
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
                buffers[0] = buffers[0][written:]

    def _start_flusher(self):
        """Wakes the flusher thread (started on first use) for the frames just held."""
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_late, name="held-frames", daemon=True)
            self._flusher.start()
        self._holding.notify()

    def _flush_late(self):
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


def tensors_from(described, payload, shared):
    """pb_utils.Tensors over the frame's payload or the shared-memory file (no copies but BYTES)."""
    tensors = []
    for name, datatype, shape, offset, length, where in described:
        source = shared if where == IN_SHARED_MEMORY else payload
        if datatype == "BYTES":
            array = pb_utils.deserialize_bytes_tensor(np.frombuffer(source, np.uint8, length, offset)).reshape(shape)
        elif datatype == "BF16":
            raise pb_utils.TritonModelException(f"input '{name}': BF16 has no numpy type")
        else:
            dtype = np.dtype(pb_utils.triton_string_to_numpy(datatype))
            array = np.frombuffer(source, dtype, length // dtype.itemsize, offset).reshape(shape)
        tensors.append(pb_utils.Tensor(name, array, datatype))
    return tensors


# Outputs this large go through shared memory (when there is room); smaller ones in the frame.
SHARED_MEMORY_FROM = 64 * 1024
ALIGNMENT = 64


class SharedOutputs:
    """The shared-memory file large outputs go through: this process copies an output into a
    free region, the data plane reads it as the response arrives and says when it is free.
    Regions are handed out as a ring, as the data plane's own for inputs."""

    def __init__(self, descriptor, size):
        self.map = mmap.mmap(descriptor, size)
        self.size = size
        self.regions = []  # [offset, freed], oldest first
        self.head = 0
        self.lock = threading.Lock()

    def put(self, data):
        """The offset `data` (a uint8 array) was copied to, or None when there is no room."""
        length = max(ALIGNMENT, -(-data.nbytes // ALIGNMENT) * ALIGNMENT)
        with self.lock:
            offset = None
            oldest = self.regions[0][0] if self.regions else None
            if oldest is None:
                offset = 0 if length <= self.size else None
            elif self.head > oldest:
                if self.head + length <= self.size:
                    offset = self.head
                elif length <= oldest:
                    offset = 0
            elif self.head + length <= oldest:
                offset = self.head
            if offset is None:
                return None
            self.regions.append([offset, False])
            self.head = offset + length
        self.map[offset : offset + data.nbytes] = data
        return offset

    def free(self, offset):
        with self.lock:
            for region in self.regions:
                if region[0] == offset and not region[1]:
                    region[1] = True
                    break
            while self.regions and self.regions[0][1]:
                self.regions.pop(0)
            if not self.regions:
                self.head = 0


def described_outputs(tensors, shared=None):
    """Outputs as the data plane reads them: [name, datatype, shape, length] and their bytes
    in the frame, or [name, datatype, shape, length, offset] for one put in shared memory."""
    described, parts = [], []
    try:
        for tensor in tensors:
            array = tensor.as_numpy()
            if tensor.triton_dtype() == "BYTES":
                data = pb_utils.serialize_byte_tensor(array)
            else:
                data = np.ascontiguousarray(array)
            entry = [tensor.name(), tensor.triton_dtype(), list(array.shape), data.nbytes]
            flat = data.reshape(-1).view(np.uint8) if data.nbytes else np.empty(0, np.uint8)
            offset = shared.put(flat) if shared is not None and data.nbytes >= SHARED_MEMORY_FROM else None
            if offset is None:
                parts.append(flat)
            else:
                entry.append(offset)
            described.append(entry)
    except BaseException:
        # The data plane frees only the regions a response it reads describes.
        free_placed(described, shared)
        raise
    return described, parts


def free_placed(described, shared):
    """Frees the regions of shared memory that outputs described by described_outputs took."""
    for entry in described:
        if len(entry) == 5:
            shared.free(entry[4])


def in_payload(described):
    """Tensors described as [name, datatype, shape, length], one after the other in a frame's
    payload, as tensors_from reads them."""
    placed, offset = [], 0
    for name, datatype, shape, length in described:
        placed.append([name, datatype, shape, offset, length, IN_PAYLOAD])
        offset += length
    return placed


def error_response(message, code=pb_utils.TritonError.INTERNAL):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code))


def error_of(error):
    if isinstance(error, pb_utils.TritonError):
        return [_ERROR_CODE_NAMES.get(error.code(), "INTERNAL"), error.message()]
    return ["INTERNAL", str(error)]


class RequestHandle:
    """What the data plane knows of one request given to execute."""

    __slots__ = ("id", "decoupled", "cancelled", "finished", "batch_size")

    def __init__(self, request_id, decoupled, batch_size):
        self.id = request_id
        self.decoupled = decoupled
        self.cancelled = False
        self.finished = False
        self.batch_size = batch_size


class Host:
    """What triton_python_backend_utils asks of the data plane."""

    def __init__(self, channel, shared_outputs=None):
        self.channel = channel
        self.shared_outputs = shared_outputs
        self.running = {}
        self.calls = {}
        self.next_call = 0
        self.lock = threading.Lock()

    def send_response(self, handle: RequestHandle, response, final: bool, hold: bool = False) -> None:
        """Sends a response of the request; one that cannot be sent (a parameter JSON cannot
        carry, an output numpy cannot give as bytes) becomes that request's final error, as
        Triton fails a response it cannot build, and the process goes on serving."""
        if handle.finished:
            raise pb_utils.TritonModelException("this request's final response was already sent")
        header = {}
        try:
            header, parts = self._response_frame(handle, response, final)
            encoded = self.channel.encode(header)
        except Exception as error:
            # The error frame describes no outputs: the regions they took are freed here.
            free_placed(header.get("o", ()), self.shared_outputs)
            message = error.message() if isinstance(error, pb_utils.TritonModelException) else str(error)
            failure = ["INTERNAL", f"the model's response cannot be sent: {message}"]
            encoded, parts, final = self.channel.encode({"t": "r", "id": handle.id, "f": True, "e": failure}), (), True
        if final:
            handle.finished = True
            self.running.pop(handle.id, None)
        self.channel.write_encoded(encoded, parts, hold)

    def _response_frame(self, handle: RequestHandle, response, final: bool) -> tuple:
        header = {"t": "r", "id": handle.id, "f": final}
        parts = ()
        if response is not None:
            if response._parameters:
                # Checked as Triton does when the response was built; here, that the frame can
                # carry them (a model may have changed them since, or return a BLS response).
                # Before the outputs: a refused response takes no shared memory.
                header["p"] = pb_utils.checked_parameters(response._parameters, "response", finite_floats=True)
            if response.has_error():
                header["e"] = error_of(response.error())
            else:
                header["o"], parts = described_outputs(response.output_tensors(), self.shared_outputs)
        return header, parts

    def bls(self, request, stream):
        with self.lock:
            self.next_call += 1
            call = self.next_call
            answers = queue.Queue()
            self.calls[call] = answers
        described, parts = described_outputs(request.inputs())
        header = {
            "t": "b",
            "id": call,
            "m": request.model_name(),
            "v": "" if request.model_version() in (-1, "", None) else str(request.model_version()),
            "i": in_payload(described),
            "o": request.requested_output_names(),
            "p": pb_utils.checked_parameters(request._parameters, "BLS request"),
            "r": request.request_id(),
            "s": stream,
            "to": request.timeout(),
        }
        self.channel.write(header, parts)
        return self._answers(call, answers)

    def _answers(self, call, answers):
        try:
            while True:
                header, payload = answers.get()
                if "e" in header:
                    code, message = header["e"]
                    yield error_response(message, _ERROR_CODE_OF_NAME.get(code, pb_utils.TritonError.INTERNAL))
                elif "o" in header:
                    response = pb_utils.InferenceResponse(output_tensors=tensors_from(in_payload(header["o"]), payload, None))
                    # The called model's parameters as they came (a KServe double included).
                    response._parameters = header.get("p") or {}
                    yield response
                if header.get("f"):
                    return
        finally:
            with self.lock:
                self.calls.pop(call, None)

    def bls_answer(self, header, payload):
        answers = self.calls.get(header["id"])
        if answers is not None:
            answers.put((header, payload))

    def log(self, level, message):
        self.channel.write({"t": "l", "l": level, "m": message})


def load_model_module(path):
    folder = os.path.dirname(path)
    # As Triton: the model's own modules next to model.py are importable.
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["model"] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "TritonPythonModel"):
        raise pb_utils.TritonModelException(f"{path} defines no class TritonPythonModel")
    return module.TritonPythonModel


class Batcher:
    """Triton's dynamic batcher for one instance: a call to execute takes the requests
    waiting, up to max_batch_size batch items, waiting up to the queue delay for a
    preferred size."""

    def __init__(self, work, batching):
        self.work = work
        self.max_items = batching["max_batch_size"] if batching else 0
        self.preferred = set(batching.get("preferred_batch_size", [])) if batching else set()
        self.delay = batching.get("max_queue_delay_microseconds", 0) / 1e6 if batching else 0
        self.carried = None

    def next(self):
        """The requests of the next execute call, or None when the instance is to finish."""
        first = self.carried if self.carried is not None else self.work.get()
        self.carried = None
        if first is None:
            return None
        batch = [first]
        if not self.max_items:
            return batch
        items = first[0].batch_size
        deadline = time.monotonic() + self.delay
        while items < self.max_items:
            wait = deadline - time.monotonic()
            try:
                if wait > 0 and items not in self.preferred:
                    item = self.work.get(timeout=wait)
                else:
                    item = self.work.get_nowait()
            except queue.Empty:
                break
            if item is None or items + item[0].batch_size > self.max_items:
                self.carried = item
                break
            batch.append(item)
            items += item[0].batch_size
        return batch


def yield_to_the_dataplane():
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


def serve(channel, settings):
    yield_to_the_dataplane()
    # The shared-memory files come as inherited descriptors of files already unlinked: nothing
    # is left behind whenever this process or the data plane is killed.
    shared = mmap.mmap(settings["shm"], settings["shmSize"]) if settings.get("shm") else None
    shared_outputs = SharedOutputs(settings["shmOut"], settings["shmSize"]) if settings.get("shmOut") else None
    for descriptor in (settings.get("shm"), settings.get("shmOut")):
        if descriptor:
            os.close(descriptor)  # mapped: the mapping holds the file
    host = Host(channel, shared_outputs)
    pb_utils._host = host
    global INSTANCE_NAME
    INSTANCE_NAME = settings["args"]["model_instance_name"]
    decoupled = settings["decoupled"]
    batched = settings["maxBatchSize"] > 0
    try:
        model = load_model_module(settings["file"])()
        if hasattr(model, "initialize"):
            model.initialize(settings["args"])
    except BaseException:
        channel.write({"t": "fatal", "m": traceback.format_exc(limit=8)})
        return 1
    work = queue.Queue()

    def read_frames():
        while True:
            frame = channel.read()
            if frame is None:
                work.put(None)
                return
            header, payload = frame
            kind = header["t"]
            if kind == "x":
                shape = header["i"][0][2] if header["i"] else []
                size = shape[0] if batched and shape else 1
                handle = RequestHandle(header["id"], decoupled, size)
                host.running[handle.id] = handle
                work.put((handle, header, payload))
            elif kind == "c":
                handle = host.running.get(header["id"])
                if handle is not None:
                    handle.cancelled = True
            elif kind == "br":
                host.bls_answer(header, payload)
            elif kind == "fo":
                for offset in header["o"]:
                    shared_outputs.free(offset)
            elif kind == "ping":
                channel.write({"t": "pong"})
            elif kind == "fini":
                work.put(None)
                return

    threading.Thread(target=read_frames, name="dataplane-reader", daemon=True).start()
    channel.write({"t": "ready"})
    batcher = Batcher(work, settings.get("batching"))
    while True:
        # Answers held back leave before the loop waits: at once when no request is queued,
        # and always before a batcher that may wait for its queue delay.
        if batcher.delay or work.empty():
            channel.flush()
        batch = batcher.next()
        if batch is None:
            break
        requests = []
        for handle, header, payload in batch:
            if handle.cancelled:
                host.send_response(handle, error_response("request cancelled", pb_utils.TritonError.CANCELLED), True)
                continue
            try:
                inputs = tensors_from(header["i"], payload, shared)
            except Exception as error:
                host.send_response(handle, error_response(str(error)), True)
                continue
            request = pb_utils.InferenceRequest(
                settings["args"]["model_name"],
                inputs,
                header.get("o", []),
                model_version=int(settings["args"]["model_version"]),
                flags=header.get("f", 0),
                correlation_id=header.get("c", 0),
                request_id=header.get("r", ""),
            )
            # The client's parameters as they came (a KServe double included): Triton checks
            # only what a model builds.
            request._parameters = header.get("p") or {}
            request._handle = handle
            requests.append(request)
        if requests:
            execute(model, requests, host, decoupled)
    channel.flush()
    if hasattr(model, "finalize"):
        try:
            model.finalize()
        except Exception:
            traceback.print_exc()
    channel.write({"t": "bye"})
    return 0


def described_exception(error):
    """An exception as Triton words it: `Type: message`, then where it was raised, innermost
    first (the stub's own frame left out)."""
    frames = traceback.extract_tb(error.__traceback__)[1:]
    where = "".join(f"  {frame.filename}({frame.lineno}): {frame.name}\n" for frame in reversed(frames))
    return f"{type(error).__name__}: {error}\n\nAt:\n{where}"


def execute_failure(error):
    """An exception from execute as Triton words it: the instance, then the exception."""
    return f"Failed to process the request(s) for model '{INSTANCE_NAME}', message: {described_exception(error)}"


def execute(model, requests, host, decoupled):
    try:
        responses = model.execute(requests)
    except Exception as error:
        # As Triton: an exception fails every request of the call still unanswered.
        failure = error_response(execute_failure(error))
        for request in requests:
            if not request._handle.finished:
                host.send_response(request._handle, failure, True, hold=True)
        return
    if decoupled:
        if responses is not None:
            for request in requests:
                if not request._handle.finished:
                    failure = error_response("a decoupled model's execute must return None and answer through the response sender")
                    host.send_response(request._handle, failure, True)
        return
    if not isinstance(responses, (list, tuple)) or len(responses) != len(requests):
        count = len(responses) if isinstance(responses, (list, tuple)) else type(responses).__name__
        failure = error_response(f"execute must return one InferenceResponse per request: {len(requests)} requests, got {count}")
        for request in requests:
            host.send_response(request._handle, failure, True, hold=True)
        return
    for request, response in zip(requests, responses):
        if not isinstance(response, pb_utils.InferenceResponse):
            response = error_response(f"execute returned {type(response).__name__}, not an InferenceResponse")
        try:
            host.send_response(request._handle, response, True, hold=True)
        except pb_utils.TritonModelException as error:
            host.send_response(request._handle, error_response(error.message()), True, hold=True)


def complete(path):
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
            print(f"auto_complete_config must return the ModelConfig it was given, not {type(completed).__name__}", file=sys.stderr)
            return 1
        config = completed.as_dict()
    with os.fdopen(COMPLETED_CONFIG, "w") as result:
        json.dump(config, result)
    return 0


def main():
    if sys.argv[1:2] == ["complete"] and len(sys.argv) == 3:
        return complete(sys.argv[2])
    channel = Channel()
    frame = channel.read()
    if frame is None:
        return 1
    return serve(channel, frame[0])


if __name__ == "__main__":
    sys.exit(main())
