"""A model that answers badly on request, to check what the server does with it. HOW is:
"nan", "inf": a response parameter that JSON cannot carry; "np_int": a numpy integer as a
response parameter; "nan_late": a NaN put in a response's parameters after it was built (past
the check Triton makes then); "bls_nan": a BLS request whose parameter is NaN; "wrong_name",
"wrong_datatype", "wrong_shape": an output its config does not declare as returned;
"nan_large": a large output (in shared memory) and a NaN parameter (put in late);
"large_then_bad": a large output then one that cannot be given as bytes; "held_outputs": how
many regions of the stub's shared memory for outputs are taken (as its PID output);
"print <seconds>": prints in a tight loop for that long; "garbage": writes a frame the data
plane cannot read on the stub's pipe (as a broken stub would); "thread": starts a thread that
is not a daemon and never ends; "raise": execute raises; "exit": the process exits; anything
else: its process id."""

import os
import struct
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

# Elements of an INT64 output large enough to go through shared memory (64 KiB and more).
LARGE = 100_000


class Unprintable:
    """An element of a BYTES output that cannot be given as bytes."""

    def __str__(self):
        raise ValueError("Unprintable has no text")


def pid_output(name="PID", dtype=np.int64, count=1):
    return pb_utils.Tensor(name, np.full([count], os.getpid(), dtype=dtype))


def with_parameters(parameters, count=1):
    return pb_utils.InferenceResponse(output_tensors=[pid_output(count=count)], parameters=parameters)


def with_late_nan(count=1):
    """A NaN parameter put in after the response was built (past the check Triton makes then)."""
    response = pb_utils.InferenceResponse(output_tensors=[pid_output(count=count)])
    response._parameters["score"] = float("nan")
    return response


def large_then_bad():
    bad = pb_utils.Tensor("BAD", np.array([Unprintable()], dtype=np.object_))
    return pb_utils.InferenceResponse(output_tensors=[pid_output(count=LARGE), bad])


def held_outputs():
    regions = pb_utils._host.shared_outputs.regions  # the stub's Host
    return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("PID", np.array([len(regions)], dtype=np.int64))])


def bls_nan():
    call = pb_utils.InferenceRequest(
        model_name="misbehaves",
        requested_output_names=["PID"],
        inputs=[pb_utils.Tensor("HOW", np.array([b"pid"], dtype=np.object_))],
        parameters={"threshold": float("nan")},
    )
    reply = call.exec()
    if reply.has_error():
        return pb_utils.InferenceResponse(error=reply.error())
    return pb_utils.InferenceResponse(output_tensors=[pid_output()])


def garbage():
    header = b'{"kind":"response","id":1,"final":true,"parameters":{"score":NaN}}'
    os.write(4, struct.pack("<II", len(header), 0) + header)
    time.sleep(5)


def raise_error():
    raise ValueError("misbehaves was asked to raise")


def endless_thread():
    threading.Thread(target=time.sleep, args=(3600,), name="never-ends", daemon=False).start()


def print_for(seconds):
    deadline = time.monotonic() + seconds
    line = 0
    while time.monotonic() < deadline:
        line += 1
        print(f"misbehaves: line {line} of a model that prints too much")


ANSWERS = {
    "nan": lambda: with_parameters({"score": float("nan")}),
    "inf": lambda: with_parameters({"score": float("-inf")}),
    "nan_late": with_late_nan,
    "nan_large": lambda: with_late_nan(count=LARGE),
    "large_then_bad": large_then_bad,
    "held_outputs": held_outputs,
    "np_int": lambda: with_parameters({"count": np.int64(3)}),
    "bls_nan": bls_nan,
    "wrong_name": lambda: pb_utils.InferenceResponse(output_tensors=[pid_output("NOT_DECLARED")]),
    "wrong_datatype": lambda: pb_utils.InferenceResponse(output_tensors=[pid_output(dtype=np.float32)]),
    "wrong_shape": lambda: pb_utils.InferenceResponse(output_tensors=[pid_output(count=3)]),
    # These do what they say, then answer the process id.
    "garbage": garbage,
    "raise": raise_error,
    "exit": lambda: os._exit(3),
    "thread": endless_thread,
}


def answer(how):
    if how.startswith("print "):
        print_for(float(how.split()[1]))
    elif how in ANSWERS:
        response = ANSWERS[how]()
        if response is not None:
            return response
    return pb_utils.InferenceResponse(output_tensors=[pid_output()])


class TritonPythonModel:
    def execute(self, requests):
        return [
            answer(pb_utils.get_input_tensor_by_name(request, "HOW").as_numpy()[0].decode()) for request in requests
        ]
