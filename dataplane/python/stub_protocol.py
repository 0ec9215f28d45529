"""The messages the data plane and the stub (dynamo_kserve_python_stub.py) exchange: each a
frame's JSON header, named by its `kind`, with named fields. The data plane's side is
dataplane/src/engines/python/protocol.ts; a unit test (python-protocol.unit.test.ts) checks
that the two describe the same kinds and fields. Tensor bytes travel in the frame's payload
or in shared memory, never in these headers.

TypedDicts: at run time these are plain dicts, as json gives them (no cost on the hot path).
The stub and pb_utils import this module for the type checker only, so it may use Python 3.11
(NotRequired) where they run on older interpreters.
"""

from typing import Any, Literal, NotRequired, TypedDict

JsonObject = dict[str, Any]


# Parts of messages.


class InputTensor(TypedDict):
    """A tensor given to a model: its bytes at `offset` in the frame's payload, or in the
    shared-memory file for inputs when `inSharedMemory`."""

    name: str
    datatype: str
    shape: list[int]
    offset: int
    byteSize: int
    inSharedMemory: bool


class OutputTensor(TypedDict):
    """A tensor a model returned: its bytes next in the frame's payload, or at `sharedOffset`
    in the shared-memory file for outputs when that is present."""

    name: str
    datatype: str
    shape: list[int]
    byteSize: int
    sharedOffset: NotRequired[int]


class ErrorReply(TypedDict):
    """An error with Triton's code name (pb_utils.TritonError: "INVALID_ARG", ...)."""

    code: str
    message: str


# From the data plane to the stub.


class SettingsMessage(TypedDict):
    """The first frame: what to load and how. The shared-memory files come as the process's
    inherited descriptors (0: none)."""

    kind: Literal["settings"]
    file: str
    decoupled: bool
    # Triton's initialize(args): every value a string.
    args: dict[str, str]
    sharedInputsFd: int
    sharedOutputsFd: int
    pythonShmByteSize: int


class ExecuteMessage(TypedDict):
    """A request for the model's execute. The requests of one execution (a batch the data
    plane's scheduler formed) come one after the other, the last with `endsExecution`: they
    run in one execute call, in the order they came."""

    kind: Literal["execute"]
    id: int
    endsExecution: bool
    inputs: list[InputTensor]
    requestedOutputs: list[str]
    parameters: JsonObject
    requestId: str
    correlationId: int | str
    flags: int


class CancelMessage(TypedDict):
    """The data plane wants no more of the request `id` (request.is_cancelled())."""

    kind: Literal["cancel"]
    id: int


class CallResponseMessage(TypedDict):
    """A response to the model's call of another model (BLS); outputs in the payload."""

    kind: Literal["callResponse"]
    id: int
    final: bool
    outputs: NotRequired[list[OutputTensor]]
    parameters: NotRequired[JsonObject]
    error: NotRequired[ErrorReply]


class FreeOutputsMessage(TypedDict):
    """The data plane has read these regions of the shared memory for outputs."""

    kind: Literal["freeOutputs"]
    offsets: list[int]


class PingMessage(TypedDict):
    kind: Literal["ping"]


class FinishMessage(TypedDict):
    """Finish: the model's finalize runs, then the process exits."""

    kind: Literal["finish"]


# From the stub to the data plane.


class ReadyMessage(TypedDict):
    """The model's initialize returned: requests may come."""

    kind: Literal["ready"]


class FatalMessage(TypedDict):
    """Loading or initializing the model failed (a traceback); the process exits."""

    kind: Literal["fatal"]
    message: str


class ResponseMessage(TypedDict):
    """A response of the request `id`: outputs or an error; `final` for its last."""

    kind: Literal["response"]
    id: int
    final: bool
    outputs: NotRequired[list[OutputTensor]]
    parameters: NotRequired[JsonObject]
    error: NotRequired[ErrorReply]


class ExecutedMessage(TypedDict):
    """A decoupled model's execute call returned (its responses may still come): `id` is the
    request that ended the execution. The instance may take its next execution."""

    kind: Literal["executed"]
    id: int


class CallMessage(TypedDict):
    """The model calls another model of the data plane (BLS); inputs in the payload."""

    kind: Literal["call"]
    id: int
    model: str
    version: str
    inputs: list[InputTensor]
    requestedOutputs: list[str]
    parameters: JsonObject
    requestId: str
    stream: bool
    timeoutUs: int


class LogMessage(TypedDict):
    """A line of pb_utils.Logger, at the data plane's level name (info, warn, error, debug)."""

    kind: Literal["log"]
    level: str
    message: str


class PongMessage(TypedDict):
    kind: Literal["pong"]


class ByeMessage(TypedDict):
    """finalize has run: the process exits."""

    kind: Literal["bye"]


# What the stub may send.
FromStubMessage = (
    ReadyMessage
    | FatalMessage
    | ResponseMessage
    | ExecutedMessage
    | CallMessage
    | LogMessage
    | PongMessage
    | ByeMessage
)

TO_STUB = (
    SettingsMessage,
    ExecuteMessage,
    CancelMessage,
    CallResponseMessage,
    FreeOutputsMessage,
    PingMessage,
    FinishMessage,
)
FROM_STUB = (
    ReadyMessage,
    FatalMessage,
    ResponseMessage,
    ExecutedMessage,
    CallMessage,
    LogMessage,
    PongMessage,
    ByeMessage,
)
PARTS = (InputTensor, OutputTensor, ErrorReply)
