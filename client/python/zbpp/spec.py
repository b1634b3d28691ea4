"""Job specs from Python: a dict, a YAML text or a YAML file, converted into
`zbpp.v1.JobSpec` by the rules of `zbppctl submit` (client/job_spec_yaml.h).

The keys are the proto's field names and nest like its messages; integers
for integer fields (range-checked), numbers for floating-point ones (`.inf`,
`.nan` as in YAML), YAML booleans, any scalar for strings; an enum by its
value name with the enum's prefix and case optional (`post`, `POST`,
`VALIDATION_MODE_POST`). The spec's schedule.file is read into
schedule.file_text, relative to the YAML file's folder (to the working
directory for a dict or a text). Whether the values make a runnable job is
the coordinator's check; this only converts.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

import yaml
from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from zbpp.errors import NotFound, SpecError
from zbpp.v1 import job_spec_pb2

#: What `Client.submit` takes: a mapping of spec fields, a YAML text, a path
#: to a YAML file (str or os.PathLike), or the message itself.
SpecLike = Union[Mapping[str, Any], str, "os.PathLike[str]", job_spec_pb2.JobSpec]

#: The largest schedule file a spec may carry (common/job_limits.h
#: kMaxScheduleFileBytes), bytes.
MAX_SCHEDULE_FILE_BYTES = 3 << 20

_NULL_TAG = "tag:yaml.org,2002:null"
_INTEGER = re.compile(r"[+-]?[0-9]+")
_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1, "an integer (int32)"),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1, "an integer (int64)"),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1, "a non-negative integer (uint32)"),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1, "a non-negative integer (uint64)"),
}
# yaml-cpp's spellings of a boolean (YAML::convert<bool>), which zbppctl reads.
_BOOLEANS = {
    **dict.fromkeys(("y", "yes", "true", "on"), True),
    **dict.fromkeys(("n", "no", "false", "off"), False),
}
_SPECIAL_FLOATS = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf, ".nan": math.nan}


def job_spec(spec: SpecLike) -> job_spec_pb2.JobSpec:
    """`spec` as a JobSpec message.

    A str holding a newline or ": " (or starting with "{") is YAML text;
    another str, or an os.PathLike, names a YAML file.

    Raises SpecError (with `field`, e.g. "pipeline.microbatches: expected an
    integer (int32), got \"many\" (line 12, column 17)", or "yaml: ..." for
    text that is not one YAML mapping) and NotFound for a spec file or
    schedule.file that cannot be read.
    """
    if isinstance(spec, job_spec_pb2.JobSpec):
        return spec
    base = Path.cwd()
    if isinstance(spec, Mapping):
        text, marks = yaml.safe_dump(dict(spec), sort_keys=False), False
    elif isinstance(spec, str) and ("\n" in spec or ": " in spec or spec.lstrip().startswith("{")):
        text, marks = spec, True
    else:
        path = Path(spec)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise NotFound(f"cannot read job spec {str(path)!r}: {e}") from None
        base, marks = path.parent, True
    message = _from_yaml(text, marks)
    _load_schedule_file(base, message)
    return message


def _where(node: yaml.Node, marks: bool) -> str:
    if not marks:
        return ""
    return f" (line {node.start_mark.line + 1}, column {node.start_mark.column + 1})"


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return "nothing" if node.tag == _NULL_TAG else "a scalar"


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL_TAG


def _from_yaml(text: str, marks: bool) -> job_spec_pb2.JobSpec:
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark and marks else ""
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError(f"yaml: not YAML{where}: {problem}", "yaml") from None
    if len(documents) > 1:
        raise SpecError(f"yaml: {len(documents)} YAML documents; a job spec is one", "yaml")
    if not documents or documents[0] is None or _is_null(documents[0]):
        raise SpecError("yaml: empty; expected a mapping of job spec fields (model, dataset, "
                        "pipeline, ...)", "yaml")
    root = documents[0]
    if not isinstance(root, yaml.MappingNode):
        raise SpecError("yaml: expected a mapping of job spec fields (model, dataset, "
                        f"pipeline, ...), got {_kind(root)}{_where(root, marks)}", "yaml")
    message = job_spec_pb2.JobSpec()
    _fill(root, "", message, marks)
    return message


def _invalid(path: str, node: yaml.Node, marks: bool, why: str) -> SpecError:
    return SpecError(f"{path}: {why}{_where(node, marks)}", path)


def _real_oneof(field: Any) -> Any:
    """The field's oneof unless it is proto3 `optional`'s synthetic one."""
    oneof = field.containing_oneof
    if oneof is None or (len(oneof.fields) == 1 and oneof.name == "_" + field.name):
        return None
    return oneof


def _fill(node: yaml.Node, path: str, message: Message, marks: bool) -> None:
    if _is_null(node):
        return  # `synthetic:` sets the message, empty
    descriptor = message.DESCRIPTOR
    seen: set[str] = set()
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode) or _is_null(key):
            raise _invalid(path or "job spec", key, marks,
                           f"keys must be plain names, got {_kind(key)}")
        name = key.value
        field_path = f"{path}.{name}" if path else name
        field = descriptor.fields_by_name.get(name)
        if field is None or (field.message_type is not None
                             and field.message_type.GetOptions().map_entry):
            known = ", ".join(f.name for f in descriptor.fields)
            scope = f" in {path}" if path else ""
            raise SpecError(f"{field_path}: unknown key{_where(key, marks)}; known{scope}: "
                            f"{known}", field_path)
        if name in seen:
            raise _invalid(field_path, key, marks, "given twice")
        seen.add(name)
        oneof = _real_oneof(field)
        if oneof is not None and message.WhichOneof(oneof.name) is not None:
            other = f"{path}.{message.WhichOneof(oneof.name)}" if path else \
                message.WhichOneof(oneof.name)
            members = ", ".join(f.name for f in oneof.fields)
            raise _invalid(field_path, key, marks,
                           f"conflicts with {other}; set one of {members}")
        if not field.is_repeated:
            _set_value(value, field_path, field, message, marks)
            continue
        if not isinstance(value, yaml.SequenceNode):
            raise _invalid(field_path, value, marks, f"expected a list, got {_kind(value)}")
        for i, item in enumerate(value.value):
            _set_value(item, f"{field_path}[{i}]", field, message, marks)


# Fields are protobuf's FieldDescriptor (its C implementation's type at run
# time, which the type stubs name apart): Any.
def _set_value(node: yaml.Node, path: str, field: Any, message: Message,
               marks: bool) -> None:
    if field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
        if not isinstance(node, yaml.MappingNode) and not _is_null(node):
            raise _invalid(path, node, marks, f"expected a mapping, got {_kind(node)}")
        if field.is_repeated:
            child = getattr(message, field.name).add()
        else:
            child = getattr(message, field.name)
            child.SetInParent()
        _fill(node, path, child, marks)
        return
    if _is_null(node):
        raise _invalid(path, node, marks, "needs a value")
    if not isinstance(node, yaml.ScalarNode):
        raise _invalid(path, node, marks, f"expected a scalar, got {_kind(node)}")
    value = _scalar(node, path, field, marks)
    if field.is_repeated:
        getattr(message, field.name).append(value)
    else:
        setattr(message, field.name, value)


def _scalar(node: yaml.ScalarNode, path: str, field: Any, marks: bool) -> Any:
    text: str = node.value

    def wrong(expected: str) -> SpecError:
        return _invalid(path, node, marks, f'expected {expected}, got "{text}"')

    kind = field.cpp_type
    if kind in _RANGES:
        low, high, expected = _RANGES[kind]
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise wrong(expected)
        return int(text)
    if kind in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        if text.lower() in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[text.lower()]
        try:
            return float(text)
        except ValueError:
            raise wrong("a number") from None
    if kind == FieldDescriptor.CPPTYPE_BOOL:
        if text.lower() not in _BOOLEANS:
            raise wrong("true or false")
        return _BOOLEANS[text.lower()]
    if kind == FieldDescriptor.CPPTYPE_ENUM:
        return _enum(field.enum_type, node, path, marks)
    return text.encode() if field.type == FieldDescriptor.TYPE_BYTES else text


def _enum_prefix(enum: EnumDescriptor) -> str:
    """"ValidationMode" -> "VALIDATION_MODE_" (protobuf's style guide)."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", enum.name).upper() + "_"


def short_enum_name(enum: EnumDescriptor, number: int) -> str:
    """An enum value as users write it: its name without the enum's prefix,
    lower case, '-' for '_' ("post" for VALIDATION_MODE_POST)."""
    name: str = enum.values_by_number[number].name
    prefix = _enum_prefix(enum)
    if name.startswith(prefix):
        name = name[len(prefix):]
    return name.lower().replace("_", "-")


def _enum(enum: EnumDescriptor, node: yaml.ScalarNode, path: str, marks: bool) -> int:
    text: str = node.value
    upper = text.upper().replace("-", "_")
    for name in (text, upper, _enum_prefix(enum) + upper):
        if name in enum.values_by_name:
            number: int = enum.values_by_name[name].number
            return number
    # proto3's "unspecified" is no choice to offer; a value 0 with a meaning
    # of its own (TRANSPORT_AUTO) is.
    known = ", ".join(short_enum_name(enum, v.number) for v in enum.values
                      if v.number != 0 or not v.name.endswith("_UNSPECIFIED"))
    raise _invalid(path, node, marks, f'expected one of {known}; got "{text}"')


def _load_schedule_file(base: Path, spec: job_spec_pb2.JobSpec) -> None:
    """Reads schedule.file (relative to `base`) into schedule.file_text."""
    name = spec.schedule.file
    if not name:
        return
    if spec.schedule.file_text:
        raise SpecError("schedule.file_text: filled from schedule.file; leave it out of the "
                        "spec", "schedule.file_text")
    path = base / name
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise NotFound(f'schedule.file: cannot read "{path}": {e}') from None
    if len(text.encode()) > MAX_SCHEDULE_FILE_BYTES:
        raise SpecError(f'schedule.file: "{path}" is over {MAX_SCHEDULE_FILE_BYTES} bytes',
                        "schedule.file")
    spec.schedule.file_text = text
