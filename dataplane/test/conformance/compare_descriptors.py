"""Checks that our proto/*.proto describe the same wire protocol as the real tritonclient.

Compares the FileDescriptorSet that `buf build` makes from proto/ with the descriptors
compiled into tritonclient's generated modules: every message, field (name, number,
type, label, message/enum type, oneof), enum value and RPC (with streaming) must match.
Comments and option differences are ignored: they do not travel on the wire.
Usage: compare_descriptors.py OURS.binpb
"""

import sys

from google.protobuf import descriptor_pb2
from tritonclient.grpc import model_config_pb2, service_pb2


def fields_of(message, prefix, out):
    out[f"message {prefix}"] = sorted(n.name for n in message.nested_type)
    for field in message.field:
        oneof = message.oneof_decl[field.oneof_index].name if field.HasField("oneof_index") else ""
        out[f"field {prefix}.{field.name}"] = (field.number, field.type, field.label, field.type_name, oneof)
    for nested in message.nested_type:
        fields_of(nested, f"{prefix}.{nested.name}", out)
    for enum in message.enum_type:
        out[f"enum {prefix}.{enum.name}"] = [(v.name, v.number) for v in enum.value]


def describe(files):
    out: dict[str, object] = {}
    for file in files:
        for message in file.message_type:
            fields_of(message, f"{file.package}.{message.name}", out)
        for enum in file.enum_type:
            out[f"enum {file.package}.{enum.name}"] = [(v.name, v.number) for v in enum.value]
        for service in file.service:
            for method in service.method:
                out[f"rpc {file.package}.{service.name}.{method.name}"] = (
                    method.input_type,
                    method.output_type,
                    method.client_streaming,
                    method.server_streaming,
                )
    return out


def reference_files():
    files = []
    for module in (model_config_pb2, service_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        files.append(proto)
    return files


def main():
    ours = descriptor_pb2.FileDescriptorSet()
    with open(sys.argv[1], "rb") as handle:
        ours.ParseFromString(handle.read())
    # Only the standard protocol; our own extensions (package dynamokserve.v1) are ours.
    mine = describe([file for file in ours.file if file.package == "inference"])
    theirs = describe(reference_files())
    problems = []
    for key in sorted(set(mine) | set(theirs)):
        if key not in mine:
            problems.append(f"missing in proto/: {key} = {theirs[key]}")
        elif key not in theirs:
            problems.append(f"not in tritonclient: {key} = {mine[key]}")
        elif mine[key] != theirs[key]:
            problems.append(f"differs: {key}: ours {mine[key]} vs tritonclient {theirs[key]}")
    for problem in problems:
        print(problem)
    print(f"{len(theirs) - len(problems)} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
