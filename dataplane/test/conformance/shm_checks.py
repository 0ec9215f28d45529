"""What tritonclient sees of system shared memory on one server, as JSON on stdout: run
against dynamo-kserve (with --allow-client-shm) and against a real Triton serving the same
`simple` and `simple_string` models, the two outputs must be the same.

The first four checks do what Triton's example programs simple_{grpc,http}_shm_client.py and
simple_{grpc,http}_shm_string_client.py do (those programs are not in the tritonclient wheel
and CI cannot download them, so this is our own code doing the same): unregister every
system and CUDA region first, create POSIX regions with tritonclient.utils.shared_memory,
register them, infer with inputs and outputs in the regions, check the values, print the
status, unregister, destroy. They use the programs' fixed keys (/input_simple, ...), so one
server at a time. The other checks drive the errors both servers agree on, with keys of
their own (DK_TEST_SHM_PREFIX from the environment, else /dk-test-<pid>, then -<n>), every
region destroyed before the script ends.

Usage: shm_checks.py GRPC_URL HTTP_URL
"""

import contextlib
import itertools
import json
import os
import sys
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient import utils
from tritonclient.utils import InferenceServerException

GRPC_URL, HTTP_URL = sys.argv[1], sys.argv[2]
PROTOCOLS = {"grpc": (grpcclient, GRPC_URL), "http": (httpclient, HTTP_URL)}
results: dict[str, Any] = {}
PREFIX = os.environ.get("DK_TEST_SHM_PREFIX", f"/dk-test-{os.getpid()}")
KEY_NUMBERS = itertools.count(1)


def own_key():
    return f"{PREFIX}-{next(KEY_NUMBERS)}"


def outcome(call, says=None):
    """A call's result, or its error: the status, and whether the message holds Triton's words."""
    try:
        return {"ok": call()}
    except InferenceServerException as error:
        failed: dict[str, Any] = {"status": str(error.status())}
        if says is not None:
            failed["says"] = says in (error.message() or "")
            if not failed["says"]:
                failed["message"] = error.message()
        return failed


def status_of(client, name=""):
    """The system regions' status in one shape for both protocols: sorted [name, key, offset, byte_size]."""
    if isinstance(client, grpcclient.InferenceServerClient):
        regions = client.get_system_shared_memory_status(region_name=name, as_json=True).get("regions", {}).values()
    else:
        regions = client.get_system_shared_memory_status(region_name=name)
    return sorted([r["name"], r["key"], int(r.get("offset", 0)), int(r["byte_size"])] for r in regions)


def cuda_status_of(client):
    if isinstance(client, grpcclient.InferenceServerClient):
        return len(client.get_cuda_shared_memory_status(as_json=True).get("regions", {}))
    return len(client.get_cuda_shared_memory_status())


def datatype_and_shape(output):
    """An output's datatype and shape from either protocol's result."""
    if isinstance(output, dict):
        return output["datatype"], output["shape"]
    return output.datatype, list(output.shape)


def reply_of(result, name):
    """What the reply says of an output in shared memory: gRPC its raw contents' length, HTTP its fields."""
    if isinstance(result, grpcclient.InferResult):
        response = result.get_response()
        index = [output.name for output in response.outputs].index(name)
        return {"raw bytes": len(response.raw_output_contents[index]), "raw entries": len(response.raw_output_contents)}
    output = result.get_output(name)
    return {"fields": sorted(output), "parameters": sorted(output.get("parameters", {}))}


def requested(module, name, region, byte_size, offset=0):
    output = (
        module.InferRequestedOutput(name, binary_data=True)
        if module is httpclient
        else module.InferRequestedOutput(name)
    )
    output.set_shared_memory(region, byte_size, offset=offset)
    return output


@contextlib.contextmanager
def program_client(module, url):
    """A client as the example programs start one: every system and CUDA region unregistered first."""
    client = module.InferenceServerClient(url)
    try:
        client.unregister_system_shared_memory()
        client.unregister_cuda_shared_memory()
        yield client
    finally:
        client.close()


def program_end(client, printed):
    """What a program prints at its end: the status of its regions, then none once it unregistered them all."""
    status = status_of(client)
    client.unregister_system_shared_memory()
    return {"outputs": printed, "status": status, "after": status_of(client)}


# The programs' inputs: 0..15 and sixteen ones.
EXAMPLE_INPUTS = (np.arange(0, 16, dtype=np.int32), np.ones(shape=16, dtype=np.int32))


def simple_shm_program(module, url):
    """simple_{grpc,http}_shm_client.py: INT32 inputs in one region, outputs in another."""
    with program_client(module, url) as client:
        input0, input1 = EXAMPLE_INPUTS
        size = input0.size * input0.itemsize
        out_handle = shm.create_shared_memory_region("output_data", "/output_simple", size * 2)
        in_handle = shm.create_shared_memory_region("input_data", "/input_simple", size * 2)
        try:
            client.register_system_shared_memory("output_data", "/output_simple", size * 2)
            shm.set_shared_memory_region(in_handle, [input0])
            shm.set_shared_memory_region(in_handle, [input1], offset=size)
            client.register_system_shared_memory("input_data", "/input_simple", size * 2)
            inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
            inputs[0].set_shared_memory("input_data", size)
            inputs[1].set_shared_memory("input_data", size, offset=size)
            outputs = [
                requested(module, "OUTPUT0", "output_data", size),
                requested(module, "OUTPUT1", "output_data", size, offset=size),
            ]
            result = client.infer(model_name="simple", inputs=inputs, outputs=outputs)
            printed = []
            for name, offset in (("OUTPUT0", 0), ("OUTPUT1", size)):
                datatype, shape = datatype_and_shape(result.get_output(name))
                values = shm.get_contents_as_numpy(out_handle, utils.triton_to_np_dtype(datatype), shape, offset=offset)
                printed.append(
                    {"datatype": datatype, "shape": shape, "values": values.tolist(), "reply": reply_of(result, name)}
                )
            assert printed[0]["values"] == [(input0 + input1).tolist()], printed
            assert printed[1]["values"] == [(input0 - input1).tolist()], printed
            return program_end(client, printed)
        finally:
            shm.destroy_shared_memory_region(in_handle)
            shm.destroy_shared_memory_region(out_handle)


def simple_string_shm_program(module, url):
    """simple_{grpc,http}_shm_string_client.py: BYTES in four regions, outputs sized exactly."""
    with program_client(module, url) as client:
        in0, in1 = EXAMPLE_INPUTS
        strings = lambda values: np.array([str(x).encode("utf-8") for x in values.flatten()], dtype=object)  # noqa: E731
        expected = [strings(in0 + in1), strings(in0 - in1)]
        serialized_in = [utils.serialize_byte_tensor(strings(in0)), utils.serialize_byte_tensor(strings(in1))]
        in_sizes = [utils.serialized_byte_size(s) for s in serialized_in]
        out_sizes = [utils.serialized_byte_size(utils.serialize_byte_tensor(e)) for e in expected]
        handles = {}
        try:
            for i in (0, 1):
                handles[f"output{i}_data"] = shm.create_shared_memory_region(
                    f"output{i}_data", f"/output{i}_simple", out_sizes[i]
                )
                client.register_system_shared_memory(f"output{i}_data", f"/output{i}_simple", out_sizes[i])
            for i in (0, 1):
                handles[f"input{i}_data"] = shm.create_shared_memory_region(
                    f"input{i}_data", f"/input{i}_simple", in_sizes[i]
                )
                shm.set_shared_memory_region(handles[f"input{i}_data"], [serialized_in[i]])
                client.register_system_shared_memory(f"input{i}_data", f"/input{i}_simple", in_sizes[i])
            inputs = []
            for i in (0, 1):
                inputs.append(module.InferInput(f"INPUT{i}", [1, 16], "BYTES"))
                inputs[-1].set_shared_memory(f"input{i}_data", in_sizes[i])
            outputs = [requested(module, f"OUTPUT{i}", f"output{i}_data", out_sizes[i]) for i in (0, 1)]
            result = client.infer(model_name="simple_string", inputs=inputs, outputs=outputs)
            printed = []
            for i in (0, 1):
                datatype, shape = datatype_and_shape(result.get_output(f"OUTPUT{i}"))
                values = shm.get_contents_as_numpy(
                    handles[f"output{i}_data"], utils.triton_to_np_dtype(datatype), shape
                )
                assert list(values[0]) == list(expected[i]), (values, expected[i])
                printed.append(
                    {
                        "datatype": datatype,
                        "shape": shape,
                        "values": [v.decode() for v in values[0]],
                        "reply": reply_of(result, f"OUTPUT{i}"),
                    }
                )
            return program_end(client, printed)
        finally:
            for handle in handles.values():
                shm.destroy_shared_memory_region(handle)


def error_checks(protocol, module, url):
    """The refusals both servers give, each as its status and whether Triton's words are there."""
    client = module.InferenceServerClient(url)
    key, small_key = own_key(), own_key()
    handle = shm.create_shared_memory_region("checks", key, 64)
    small = shm.create_shared_memory_region("small", small_key, 32)
    try:
        shm.set_shared_memory_region(handle, [np.arange(16, dtype=np.int32)])
        # Regions start at offset 0 of their object: the 2.5x Triton the tests run maps a
        # region at its offset, which must then be page-aligned (current Triton maps the whole object).
        checks = {
            "unregister all first": outcome(lambda: client.unregister_system_shared_memory() and None),
            "unregister cuda first": outcome(lambda: client.unregister_cuda_shared_memory() and None),
            "status with none": outcome(lambda: status_of(client)),
            "cuda status with none": outcome(lambda: cuda_status_of(client)),
            "register": outcome(lambda: client.register_system_shared_memory("a", key, 64) and None),
            "register another": outcome(lambda: client.register_system_shared_memory("b", small_key, 32) and None),
            "status of two": outcome(lambda: [row[2:] for row in status_of(client)]),
            "status of one": outcome(lambda: [row[2:] for row in status_of(client, "b")]),
            "status of an unknown name": outcome(
                lambda: status_of(client, "nope"), "Unable to find system shared memory region: 'nope'"
            ),
            "register a name taken": outcome(
                lambda: client.register_system_shared_memory("a", key, 64),
                "shared memory region 'a' already in manager",
            ),
            "register a key that is not there": outcome(
                lambda: client.register_system_shared_memory("d", own_key(), 8),
                "Unable to open shared memory region",
            ),
        }

        def infer(region, offset=0, byte_size=64, out=None):
            inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
            inputs[0].set_shared_memory(region, byte_size, offset=offset)
            inputs[1].set_data_from_numpy(np.ones((1, 16), dtype=np.int32))
            outputs = None
            if out is not None:
                outputs = [requested(module, "OUTPUT0", *out), module.InferRequestedOutput("OUTPUT1")]
            result = client.infer("simple", inputs, outputs=outputs)
            return result.as_numpy("OUTPUT1").tolist()

        checks["infer beside a tensor sent in the request"] = outcome(lambda: infer("a"))
        checks["infer from an unknown region"] = outcome(
            lambda: infer("nope"), "Unable to find shared memory region: 'nope'"
        )
        checks["infer at an offset past the region"] = outcome(
            lambda: infer("b", offset=32, byte_size=0), "Invalid offset for shared memory region: 'b'"
        )
        checks["infer with a byte size past the region"] = outcome(
            lambda: infer("b", offset=0, byte_size=64), "Invalid offset + byte size for shared memory region: 'b'"
        )
        checks["infer with a wrong byte size"] = outcome(lambda: infer("a", byte_size=32))
        checks["infer into an output region too small"] = outcome(
            lambda: infer("a", out=("b", 16)),
            "shared memory size specified with the request for output 'OUTPUT0' (16 bytes) should be at least 64 bytes",
        )
        checks["unregister one"] = outcome(lambda: client.unregister_system_shared_memory("a") and None)
        checks["unregister an unknown name"] = outcome(lambda: client.unregister_system_shared_memory("nope") and None)
        checks["infer from an unregistered region"] = outcome(
            lambda: infer("a"), "Unable to find shared memory region: 'a'"
        )
        checks["status after"] = outcome(lambda: [row[0] for row in status_of(client)])
        checks["unregister all"] = outcome(lambda: client.unregister_system_shared_memory() and None)
        checks["status at the end"] = outcome(lambda: status_of(client))
        for name, result in checks.items():
            results[f"{protocol} {name}"] = result
    finally:
        client.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(handle)
        shm.destroy_shared_memory_region(small)
        client.close()


for protocol, (module, url) in PROTOCOLS.items():
    results[f"{protocol} simple shm program"] = outcome(lambda m=module, u=url: simple_shm_program(m, u))
    results[f"{protocol} simple_string shm program"] = outcome(lambda m=module, u=url: simple_string_shm_program(m, u))
for protocol, (module, url) in PROTOCOLS.items():
    error_checks(protocol, module, url)
assert len(shm.mapped_shared_memory_regions()) == 0, shm.mapped_shared_memory_regions()
print(json.dumps(results, indent=1, sort_keys=True))
