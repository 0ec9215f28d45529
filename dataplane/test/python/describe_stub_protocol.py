"""Prints the stub's messages (dataplane/python/stub_protocol.py) as JSON, in the form of the
data plane's STUB_PROTOCOL (dataplane/src/engines/python/protocol.ts), for
python-protocol.unit.test.ts to compare: {"parts": {name: fields}, "toStub": {kind: fields},
"fromStub": {kind: fields}}, a field's type written as protocol.ts writes it.

Usage: describe_stub_protocol.py <folder of stub_protocol.py>
"""

import json
import sys
import types
import typing
from typing import Any, Literal, NotRequired, get_args, get_origin, get_type_hints

sys.path.insert(0, sys.argv[1])
import stub_protocol

PART_NAMES = {part: part.__name__ for part in stub_protocol.PARTS}
SCALARS = {int: "number", float: "number", str: "string", bool: "boolean", type(None): "null"}


def written(annotation: Any) -> str:
    """A type as protocol.ts writes it."""
    origin = get_origin(annotation)
    if origin is NotRequired:
        return written(get_args(annotation)[0]) + "?"
    if origin in (typing.Union, types.UnionType):
        return "|".join(written(member) for member in get_args(annotation))
    if origin is list:
        return written(get_args(annotation)[0]) + "[]"
    if origin is dict:
        return "object"
    if annotation in PART_NAMES:
        return PART_NAMES[annotation]
    if annotation in SCALARS:
        return SCALARS[annotation]
    raise TypeError(f"no written form for {annotation!r}")


def fields(typed_dict: Any) -> dict[str, str]:
    hints = get_type_hints(typed_dict, include_extras=True)
    return {name: written(hint) for name, hint in hints.items() if name != "kind"}


def kind(message: Any) -> str:
    annotation = get_type_hints(message)["kind"]
    if get_origin(annotation) is not Literal:
        raise TypeError(f"{message.__name__}.kind is not a Literal")
    value: str = get_args(annotation)[0]
    return value


print(
    json.dumps(
        {
            "parts": {part.__name__: fields(part) for part in stub_protocol.PARTS},
            "toStub": {kind(message): fields(message) for message in stub_protocol.TO_STUB},
            "fromStub": {kind(message): fields(message) for message in stub_protocol.FROM_STUB},
        }
    )
)
