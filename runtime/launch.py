"""Kernel launches (the launch JSON) and the result JSON.

Two launch formats are accepted:

- DESIGN §3: ``{"kernel", "grid", "block", "args": [{"type": "s32*", "data": [...],
  "offset"?: k}, {"type": "s32", "value": 3}], "dynamic_shared_bytes"?}``;
- the shared kernel suite's: ``{"kernel", "grid", "block", "params": [{name, kind:
  "ptr", elem, data, offset} | {name, kind: "scalar", type, value}],
  "dynamic_shared_bytes"}`` (its other keys — expected values, notes — are ignored).

Validation is strict; every problem raises `LaunchError` naming the field, e.g.
``launch.json: args[2].type: unknown type 'i32' (expected one of ...)``.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qgc.diagnostics import QgcError

ELEMENT_TYPES = ("u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64", "f32")
TYPE_SIZES = {t: int(t[1:]) // 8 for t in ELEMENT_TYPES}
FLOAT_STRINGS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
MAX_BLOCK_THREADS = 1024

_DESIGN_KEYS = {"kernel", "grid", "block", "args", "dynamic_shared_bytes"}
_ARG_KEYS = {"type", "data", "value", "offset", "name"}


class LaunchError(QgcError):
    """A malformed launch, or one that does not fit the kernel (exit status 2)."""

    def __init__(self, message: str):
        super().__init__(message, status=2)


@dataclass
class Arg:
    """One kernel argument: a buffer (`pointer`, `data`, `offset` in elements)
    or a scalar (`value`); `type` is the element type, e.g. ``"s32"``."""

    type: str
    pointer: bool
    data: list | None = None
    value: int | float | None = None
    offset: int = 0
    name: str | None = None

    @property
    def spelled(self) -> str:
        return self.type + ("*" if self.pointer else "")


@dataclass
class Launch:
    """One kernel launch; `kernel` None means the module's only entry."""

    kernel: str | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list[Arg] = field(default_factory=list)
    dynamic_shared_bytes: int = 0

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


def load_launch(source: str | Path | dict, name: str | None = None) -> Launch:
    """Read a launch from a dict, JSON text, or a path to a JSON file."""
    where = name
    if isinstance(source, dict):
        obj: Any = source
        where = where or "launch"
    else:
        text, where = _read_source(source, where)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise LaunchError(f"{where}:{err.lineno}:{err.colno}: malformed JSON: {err.msg}") \
                from None
    return _Parser(where).launch(obj)


def _read_source(source: str | Path, where: str | None) -> tuple[str, str]:
    if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        return source, where or "launch"
    path = Path(source)
    try:
        return path.read_text(), where or str(source)
    except OSError as err:
        raise LaunchError(f"{source}: cannot read the launch file: {err.strerror}") from None


class _Parser:
    def __init__(self, where: str):
        self.where = where

    def error(self, field_name: str, message: str) -> LaunchError:
        prefix = f"{self.where}: {field_name}: " if field_name else f"{self.where}: "
        return LaunchError(prefix + message)

    def launch(self, obj: Any) -> Launch:
        if not isinstance(obj, dict):
            raise self.error("", f"expected a JSON object, got {_kind(obj)}")
        suite = "params" in obj
        if not suite:
            unknown = sorted(set(obj) - _DESIGN_KEYS)
            if unknown:
                raise self.error(unknown[0], "unknown field (expected kernel, grid, block, "
                                 "args, dynamic_shared_bytes)")
            if "args" not in obj:
                raise self.error("args", "missing (the kernel's arguments, in parameter order)")
        kernel = obj.get("kernel")
        if kernel is not None and (not isinstance(kernel, str) or not kernel):
            raise self.error("kernel", f"expected the name of a kernel, got {_kind(kernel)}")
        grid = self.dims(obj, "grid")
        block = self.dims(obj, "block")
        if block[0] * block[1] * block[2] > MAX_BLOCK_THREADS:
            raise self.error("block", f"{block[0]}x{block[1]}x{block[2]} threads exceed "
                             f"CUDA's limit of {MAX_BLOCK_THREADS} threads per block")
        dyn = obj.get("dynamic_shared_bytes", 0)
        if not _is_int(dyn) or dyn < 0:
            raise self.error("dynamic_shared_bytes",
                             f"expected a non-negative integer, got {_show(dyn)}")
        args = self.params(obj["params"]) if suite else self.args(obj["args"])
        return Launch(kernel, grid, block, args, dyn)

    def dims(self, obj: dict, key: str) -> tuple[int, int, int]:
        if key not in obj:
            raise self.error(key, "missing (1 to 3 positive integers)")
        value = obj[key]
        if _is_int(value):
            value = [value]
        if not isinstance(value, list) or not 1 <= len(value) <= 3:
            raise self.error(key, f"expected 1 to 3 positive integers, got {_show(value)}")
        for i, v in enumerate(value):
            if not _is_int(v) or v < 1:
                raise self.error(f"{key}[{i}]", f"expected a positive integer, got {_show(v)}")
        limit = (2**31 - 1, 65535, 65535) if key == "grid" else (1024, 1024, 64)
        for i, v in enumerate(value):
            if v > limit[i]:
                raise self.error(f"{key}[{i}]", f"{v} exceeds CUDA's limit of {limit[i]}")
        padded = list(value) + [1] * (3 - len(value))
        return padded[0], padded[1], padded[2]

    # ------------------------------------------------------------ DESIGN format
    def args(self, items: Any) -> list[Arg]:
        if not isinstance(items, list):
            raise self.error("args", f"expected a list of arguments, got {_kind(items)}")
        return [self.arg(item, f"args[{i}]") for i, item in enumerate(items)]

    def arg(self, item: Any, path: str) -> Arg:
        if not isinstance(item, dict):
            raise self.error(path, f"expected an object, got {_kind(item)}")
        unknown = sorted(set(item) - _ARG_KEYS)
        if unknown:
            raise self.error(f"{path}.{unknown[0]}", "unknown field (expected type, data, "
                             "value, offset)")
        if "type" not in item:
            raise self.error(f"{path}.type", "missing")
        spelled = item["type"]
        if not isinstance(spelled, str):
            raise self.error(f"{path}.type", f"expected a type name, got {_kind(spelled)}")
        pointer = spelled.endswith("*")
        elem = self.elem_type(spelled[:-1] if pointer else spelled, f"{path}.type", spelled)
        name = item.get("name")
        if name is not None and not isinstance(name, str):
            raise self.error(f"{path}.name", f"expected a string, got {_kind(name)}")
        if pointer:
            if "value" in item:
                raise self.error(f"{path}.value", "a pointer argument takes 'data', not 'value'")
            return self.buffer(elem, item, path, "data", name)
        if "data" in item or "offset" in item:
            key = "data" if "data" in item else "offset"
            raise self.error(f"{path}.{key}", f"a scalar argument takes 'value' "
                             f"(use '{elem}*' for a buffer)")
        if "value" not in item:
            raise self.error(f"{path}.value", "missing")
        return Arg(elem, False, value=self.scalar(elem, item["value"], f"{path}.value"),
                   name=name)

    def elem_type(self, text: str, path: str, spelled: str | None = None) -> str:
        if text not in ELEMENT_TYPES:
            shown = spelled if spelled is not None else text
            raise self.error(path, f"unknown type '{shown}' (expected one of "
                             f"{' '.join(ELEMENT_TYPES)}, with '*' for a pointer)")
        return text

    def buffer(self, elem: str, item: dict, path: str, key: str, name: str | None) -> Arg:
        if key not in item:
            raise self.error(f"{path}.{key}", "missing (the buffer's initial contents)")
        data = item[key]
        if not isinstance(data, list):
            raise self.error(f"{path}.{key}", f"expected a list of {elem} values, "
                             f"got {_kind(data)}")
        values = [self.scalar(elem, v, f"{path}.{key}[{i}]") for i, v in enumerate(data)]
        offset = item.get("offset", 0)
        if not _is_int(offset) or abs(offset) > 1 << 24:
            raise self.error(f"{path}.offset", f"expected an integer element offset, "
                             f"got {_show(offset)}")
        return Arg(elem, True, data=values, offset=offset, name=name)

    def scalar(self, elem: str, value: Any, path: str) -> int | float:
        if elem == "f32":
            return self.f32_value(value, path)
        if not _is_int(value):
            raise self.error(path, f"expected an integer ({elem}), got {_show(value)}")
        bits = TYPE_SIZES[elem] * 8
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if elem[0] == "s" \
            else (0, (1 << bits) - 1)
        if not lo <= value <= hi:
            raise self.error(path, f"{value} does not fit {elem} ({lo}..{hi})")
        return value

    def f32_value(self, value: Any, path: str) -> float:
        if isinstance(value, str) and value in FLOAT_STRINGS:
            return FLOAT_STRINGS[value]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(path, f"expected a number or \"nan\", \"inf\", \"-inf\" (f32), "
                             f"got {_show(value)}")
        try:
            x = float(value)
            struct.pack("<f", x)
        except (OverflowError, ValueError):
            raise self.error(path, f"{value} does not fit f32 (largest finite magnitude "
                             "3.4028235e+38)") from None
        return x

    # ------------------------------------------------------------ suite format
    def params(self, items: Any) -> list[Arg]:
        if not isinstance(items, list):
            raise self.error("params", f"expected a list of parameters, got {_kind(items)}")
        return [self.param(item, f"params[{i}]") for i, item in enumerate(items)]

    def param(self, item: Any, path: str) -> Arg:
        if not isinstance(item, dict):
            raise self.error(path, f"expected an object, got {_kind(item)}")
        name = item.get("name")
        if name is not None and not isinstance(name, str):
            raise self.error(f"{path}.name", f"expected a string, got {_kind(name)}")
        kind = item.get("kind")
        if kind == "ptr":
            if "elem" not in item:
                raise self.error(f"{path}.elem", "missing")
            elem = self.elem_type(_str_or(item["elem"]), f"{path}.elem")
            return self.buffer(elem, item, path, "data", name)
        if kind == "scalar":
            if "type" not in item:
                raise self.error(f"{path}.type", "missing")
            elem = self.elem_type(_str_or(item["type"]), f"{path}.type")
            if "value" not in item:
                raise self.error(f"{path}.value", "missing")
            return Arg(elem, False, value=self.scalar(elem, item["value"], f"{path}.value"),
                       name=name)
        raise self.error(f"{path}.kind", f"expected \"ptr\" or \"scalar\", got {_show(kind)}")


def _str_or(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {json.dumps(value)}"
    if isinstance(value, int | float):
        return f"the number {value}"
    return type(value).__name__


def _show(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------------- results

def format_result(buffers: list[list | None]) -> str:
    """The result JSON: ``{"buffers": [[1, 2, 3], [4, 5, 6], [32], null]}``.

    One entry per kernel argument: the final buffer contents, or null for a
    scalar. Integers print as JSON integers. f32 values print as JSON numbers
    (the shortest repr of the Python float holding the float32 value exactly,
    so they round-trip to the same float32); JSON has no NaN or infinities, so
    those print as the strings "nan", "inf" and "-inf" — the same spellings
    the launch JSON accepts for f32 data.
    """
    return json.dumps({"buffers": [None if b is None else [_json_value(v) for v in b]
                                   for b in buffers]})


def _json_value(value: int | float) -> int | float | str:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value


def select_kernel(kernels: list, kernel: str | None, what: str):
    """The kernel a launch names among `kernels` (objects with `kernel_name`), or
    the only one when the launch names none; LaunchError otherwise."""
    names = ", ".join(f"'{k.kernel_name}'" for k in kernels) or "none"
    if kernel is None:
        if len(kernels) != 1:
            raise LaunchError(f"the launch names no kernel and the {what} has "
                              f"{len(kernels)} entries ({names}); set \"kernel\"")
        return kernels[0]
    for k in kernels:
        if k.kernel_name == kernel:
            return k
    raise LaunchError(f"kernel '{kernel}' is not an entry of the {what} (entries: {names})")
