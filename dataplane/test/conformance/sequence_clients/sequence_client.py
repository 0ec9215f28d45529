"""The scenarios of Triton's Python sequence client programs, written anew with tritonclient.

Triton's client repository has four programs (simple_grpc_sequence_sync_infer_client.py,
simple_grpc_sequence_stream_infer_client.py, simple_grpc_aio_sequence_stream_infer_client.py,
simple_http_sequence_sync_infer_client.py); the tritonclient wheel does not ship them and the
tests cannot download them, so this script runs the same scenarios with the same values:

    sequence_client.py PROGRAM [-d] -u HOST:PORT [--int-ids-only] [--repeat N]

PROGRAM is grpc_sync, grpc_stream, grpc_aio_stream or http_sync. Three sequences of 8
requests (INPUT INT32 [1, 1]): two with integer IDs 1000 and 1001 on simple_sequence, and one
with a string ID on simple_sequence (a UUID); with -d, simple_dyna_sequence, and the string ID
"1002" on simple_string_dyna_sequence. It prints each step's three outputs, then PASS, and
exits 1 on an error or a value the programs would not accept (printing what it expected).
"""

import argparse
import asyncio
import queue
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

VALUES = [11, 7, 5, 3, 2, 0, 1]
STREAM_WAIT_S = 60


@dataclass
class Sequence:
    sequence_id: int | str
    model: str
    inputs: list[int]
    outputs: list[int] = field(default_factory=list)

    def requests(self) -> list[dict[str, Any]]:
        """The keyword arguments of each request's infer call but `inputs` (the client's type)."""
        last = len(self.inputs)
        return [
            {
                "model_name": self.model,
                "request_id": f"{self.sequence_id}_{step}",
                "sequence_id": self.sequence_id,
                "sequence_start": step == 1,
                "sequence_end": step == last,
                "value": value,
            }
            for step, value in enumerate(self.inputs, start=1)
        ]


def sequences(dyna: bool) -> list[Sequence]:
    int_model = "simple_dyna_sequence" if dyna else "simple_sequence"
    string_model = "simple_string_dyna_sequence" if dyna else "simple_sequence"
    # The dyna models need an ID that reads as an integer; simple_sequence takes any string.
    string_id = "1002" if dyna else str(uuid.uuid4())
    negated = [-value for value in VALUES]
    return [
        Sequence(1000, int_model, [0, *VALUES]),
        Sequence(1001, int_model, [100, *negated]),
        Sequence(string_id, string_model, [20, *negated]),
    ]


def expected(sequence: Sequence, step: int, dyna: bool) -> int:
    """What the example models answer at `step` (the programs' expectations).

    simple_sequence and simple_dyna_sequence answer INPUT + START (+ the ID on END for the
    dyna one); simple_string_dyna_sequence accumulates (+ the ID on END)."""
    value = sequence.inputs[step]
    first, last = step == 0, step == len(sequence.inputs) - 1
    accumulates = dyna and isinstance(sequence.sequence_id, str)
    answer = (0 if first else sequence.outputs[step - 1]) + value if accumulates else value + int(first)
    return answer + int(sequence.sequence_id) if dyna and last else answer


def check(all_sequences: list[Sequence], dyna: bool, program: str) -> int:
    for sequence in all_sequences:
        if len(sequence.outputs) != len(sequence.inputs):
            print(f"sequence {sequence.sequence_id}: {len(sequence.outputs)} responses, not {len(sequence.inputs)}")
            return 1
    for step in range(len(all_sequences[0].inputs)):
        print(f"[{step}] " + " : ".join(str(sequence.outputs[step]) for sequence in all_sequences))
        wanted = [expected(sequence, step, dyna) for sequence in all_sequences]
        if wanted != [sequence.outputs[step] for sequence in all_sequences]:
            print("[ expected ] " + " : ".join(str(value) for value in wanted))
            return 1
    print(f"PASS: {program}")
    return 0


def tensor(module: Any, value: int) -> Any:
    data = np.full((1, 1), value, dtype=np.int32)
    infer_input = module.InferInput("INPUT", list(data.shape), "INT32")
    infer_input.set_data_from_numpy(data)
    return infer_input


def output_of(result: Any) -> int:
    return int(result.as_numpy("OUTPUT")[0][0])


def call(module: Any, client: Any, request: dict[str, Any]) -> Any:
    arguments = {key: value for key, value in request.items() if key not in ("value", "request_id")}
    outputs = [module.InferRequestedOutput("OUTPUT")]
    return client.infer(inputs=[tensor(module, request["value"])], outputs=outputs, **arguments)


def run_sync(module: Any, url: str, all_sequences: list[Sequence]) -> None:
    """Each sequence's requests one after the other, one sequence after the other."""
    client = module.InferenceServerClient(url=url)
    try:
        for sequence in all_sequences:
            for request in sequence.requests():
                sequence.outputs.append(output_of(call(module, client, request)))
    finally:
        client.close()


def collect(all_sequences: list[Sequence], results: Callable[[], Any]) -> None:
    """Each response, in the order it arrived, to the sequence its request ID names."""
    by_id = {str(sequence.sequence_id): sequence for sequence in all_sequences}
    for _ in range(sum(len(sequence.inputs) for sequence in all_sequences)):
        result = results()
        if isinstance(result, InferenceServerException):
            raise result
        by_id[result.get_response().id.split("_")[0]].outputs.append(output_of(result))


def run_stream(url: str, all_sequences: list[Sequence]) -> None:
    """Every request on one ModelStreamInfer stream, sent without waiting for responses."""
    arrived: queue.Queue[Any] = queue.Queue()
    with grpcclient.InferenceServerClient(url=url) as client:
        client.start_stream(callback=lambda result, error: arrived.put(error if error else result))
        for sequence in all_sequences:
            for request in sequence.requests():
                value = request.pop("value")
                outputs = [grpcclient.InferRequestedOutput("OUTPUT")]
                client.async_stream_infer(inputs=[tensor(grpcclient, value)], outputs=outputs, **request)
        collect(all_sequences, lambda: arrived.get(timeout=STREAM_WAIT_S))
        client.stop_stream()


async def run_aio_stream(url: str, all_sequences: list[Sequence]) -> None:
    """The same over tritonclient.grpc.aio's stream_infer, fed by an async iterator."""

    async def requests() -> AsyncIterator[dict[str, Any]]:
        for sequence in all_sequences:
            for request in sequence.requests():
                value = request.pop("value")
                outputs = [aioclient.InferRequestedOutput("OUTPUT")]
                yield {"inputs": [tensor(aioclient, value)], "outputs": outputs, **request}

    arrived: list[Any] = []
    async with aioclient.InferenceServerClient(url=url) as client:
        responses = client.stream_infer(inputs_iterator=requests(), stream_timeout=STREAM_WAIT_S)
        async for result, error in responses:
            arrived.append(error if error else result)
    replies = iter(arrived)
    collect(all_sequences, lambda: next(replies, InferenceServerException("the stream ended early")))


PROGRAMS: dict[str, Callable[[str, list[Sequence]], None]] = {
    "grpc_sync": lambda url, all_sequences: run_sync(grpcclient, url, all_sequences),
    "http_sync": lambda url, all_sequences: run_sync(httpclient, url, all_sequences),
    "grpc_stream": run_stream,
    "grpc_aio_stream": lambda url, all_sequences: asyncio.run(run_aio_stream(url, all_sequences)),
}


def run_once(program: str, url: str, dyna: bool, int_ids_only: bool) -> int:
    all_sequences = sequences(dyna)[: 2 if int_ids_only else 3]
    try:
        PROGRAMS[program](url, all_sequences)
    except (InferenceServerException, queue.Empty) as error:
        print(error if str(error) else f"no response within {STREAM_WAIT_S} s")
        return 1
    return check(all_sequences, dyna, program)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("program", choices=sorted(PROGRAMS))
    parser.add_argument("-u", "--url", required=True, help="host:port (gRPC, or HTTP for http_sync)")
    parser.add_argument("-d", "--dyna", action="store_true", help="the Oldest-strategy (dyna) models")
    parser.add_argument(
        "--int-ids-only",
        action="store_true",
        help="leave out the string-ID sequence (Triton before 2.54 pads a string CORRID control to "
        "132 bytes and refuses its own request: 'unexpected number of string elements 2')",
    )
    parser.add_argument("--repeat", type=int, default=1, help="run the program this many times (one process)")
    flags = parser.parse_args()
    failed = sum(run_once(flags.program, flags.url, flags.dyna, flags.int_ids_only) != 0 for _ in range(flags.repeat))
    if flags.repeat > 1:
        print(f"runs passed: {flags.repeat - failed}/{flags.repeat}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
