"""Kernel launches (the launch JSON) and the result JSON.

Two launch formats are accepted (docs/launch.md):

- DESIGN §3: ``{"kernel", "grid", "block", "args": [{"type": "s32*", "data": [...],
  "offset"?: k}, {"type": "s32", "value": 3}], "dynamic_shared_bytes"?}``;
- the shared kernel suite's: ``{"kernel", "grid", "block", "params": [{name, kind:
  "ptr", elem, data, offset} | {name, kind: "scalar", type, value}],
  "dynamic_shared_bytes"}`` (its other keys — expected values, notes — are ignored).

The structure is checked against `launch.schema.json` (JSON Schema 2020-12, with
the `jsonschema` library); what a schema cannot say — element values against
their type, threads per block and per launch — is checked here. Every problem
raises `LaunchError` naming the file and the field, e.g.
``launch.json: error: args[2].type: unknown type 'i32' (expected one of ...)``.

Limits, checked before an engine allocates anything: CUDA's (per-axis grid and
block sizes, 1024 threads per block, 227 KiB of dynamic shared memory), at most
`MAX_LAUNCH_THREADS` threads per launch, and each engine's step limit
(`STEP_LIMITS`, `qgc run --max-steps N`): a launch runs at least one step per
warp, so one with more warps than the limit is refused up front.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from qgc.diagnostics import QgcError, format_diagnostic

ELEMENT_TYPES = ("u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64", "f32", "f64")
TYPE_SIZES = {t: int(t[1:]) // 8 for t in ELEMENT_TYPES}
FLOAT_STRINGS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
MAX_BLOCK_THREADS = 1024
#: qgc's engines are simulators: a launch of more threads is refused (grid × block).
MAX_LAUNCH_THREADS = 1 << 20
#: engine → (what one step is, the default limit `--max-steps` overrides).
STEP_LIMITS = {"ref": ("warp instructions", 10_000_000), "simt": ("EXEC steps", 1_000_000),
               "tensor": ("EXEC steps", 100_000), "model": ("EXEC steps", 100_000),
               "compact": ("EXEC steps", 100_000)}
SCHEMA_PATH = Path(__file__).with_name("launch.schema.json")


class LaunchError(QgcError):
    """A malformed launch, or one that does not fit the kernel or a limit (exit
    status 2). With a `source` (the launch file) it reads ``FILE: error: ...``,
    or ``FILE:LINE:COL: error: ...`` with the line and a caret where `line` is
    known; engines raise it bare and `blame(launch)` names the file."""

    def __init__(self, message: str, source: str | None = None, line: int | None = None,
                 column: int = 1, text: str | None = None):
        self.message, self.source = message, source
        if source is not None and line is not None:
            shown = format_diagnostic(source, line, column, message, text)
        else:
            shown = f"{source}: error: {message}" if source is not None else message
        super().__init__(shown, status=2)

    def at(self, source: str) -> LaunchError:
        """This error, named on `source` (unless it already names a file)."""
        return self if self.source is not None else LaunchError(self.message, source)


@contextmanager
def blame(launch: Launch | None) -> Iterator[None]:
    """Name the launch's file on the `LaunchError`s raised inside (an engine
    checking the launch against a kernel does not know the file); without a
    launch, or one not read from a file, they pass as they are."""
    try:
        yield
    except LaunchError as err:
        if launch is None or launch.source is None:
            raise
        raise err.at(launch.source) from None


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
    """One kernel launch; `kernel` None means the module's only entry;
    `source` names the launch in diagnostics (its file)."""

    kernel: str | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list[Arg] = field(default_factory=list)
    dynamic_shared_bytes: int = 0
    source: str | None = field(default=None, compare=False, repr=False)

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def ctas(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def warps_per_cta(self, warp_size: int) -> int:
        """A CTA's threads in warps of `warp_size` lanes."""
        return -(-self.threads_per_block // warp_size)

    def warps(self, warp_size: int) -> int:
        """The launch's warps: every CTA's threads in warps of `warp_size` lanes."""
        return self.ctas * self.warps_per_cta(warp_size)


def check_steps(launch: Launch, max_steps: int, step: str, warp_size: int) -> None:
    """Refuse, before anything is allocated, a launch that cannot finish within
    `max_steps` steps (`step`: what one is): every warp runs at least one."""
    warps = launch.warps(warp_size)
    if warps > max_steps:
        raise LaunchError(
            f"the launch needs at least {warps} {step}, one for each of its {warps} warps "
            f"({launch.ctas} CTAs of {launch.threads_per_block} threads, {warp_size}-lane "
            f"warps): past the limit of {max_steps} {step} (--max-steps {max_steps}) by "
            f"{warps - max_steps}", launch.source)


def step_limit_trap(max_steps: int, step: str, where: str = ""):
    """The run-time error of a launch that ran past its step limit (status 3)."""
    from qgc.runtime.memory import Trap
    return Trap(f"error: the launch ran past the limit of {max_steps} {step} (--max-steps "
                f"{max_steps}){where}; an endless loop?")


def load_launch(source: str | Path | dict, name: str | None = None) -> Launch:
    """Read a launch from a dict, JSON text, or a path to a JSON file."""
    if isinstance(source, dict):
        obj: Any = source
        where = name or "launch"
    else:
        obj, where = read_json(source, name, "launch file")
    problem = schema_problem(obj)
    if problem is not None:
        raise LaunchError(problem, where)
    launch = _Parser(where).launch(obj)
    launch.source = where
    return launch


def read_json(source: str | Path, name: str | None, what: str) -> tuple[Any, str]:
    """The JSON value in a file (or in text that starts like JSON) and the name
    diagnostics give it; a `LaunchError` for anything that is not JSON."""
    if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        text, where = source, name or "launch"
    else:
        where = name or str(source)
        try:
            raw = Path(source).read_bytes()
        except OSError as err:
            raise LaunchError(f"cannot read the {what}: {err.strerror}", where) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise LaunchError(f"the {what} is not UTF-8 text (byte 0x{raw[err.start]:02x} "
                              f"at offset {err.start})", where) from None
    try:
        return json.loads(text), where
    except json.JSONDecodeError as err:
        raise LaunchError(f"malformed JSON: {err.msg}", where, err.lineno, err.colno,
                          text) from None
    except (ValueError, RecursionError) as err:   # a number past Python's digits, deep nesting
        reason = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise LaunchError(f"malformed JSON: {reason}", where) from None


# ------------------------------------------------------------------ the schema

@cache
def _validator():
    from jsonschema import Draft202012Validator, validators

    # JSON's 1.0 is a number, not an integer (the default checker takes it as one)
    checker = Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: _is_int(value))
    strict = validators.extend(Draft202012Validator, type_checker=checker)
    return strict(json.loads(SCHEMA_PATH.read_text()))


def schema_problem(obj: Any) -> str | None:
    """The first thing `launch.schema.json` finds wrong with `obj`, in qgc's
    words (``args[2].type: unknown type ...``), or None."""
    from jsonschema.exceptions import best_match

    try:
        error = best_match(_validator().iter_errors(obj), key=_shallowest_first)
    except RecursionError:
        return "the launch is nested too deeply"
    if error is None:
        return None
    return _in_our_words(error, obj)


def _shallowest_first(error) -> int:
    """The best error is the one nearest the root, by the field it names (a
    missing or unknown field is one level below the object it belongs to),
    the first in the schema's order among equals."""
    names_a_field = error.validator in ("required", "additionalProperties")
    return -(len(error.path) + names_a_field)


def _in_our_words(error, root: Any) -> str:
    path = list(error.absolute_path)
    schema = _resolved(error.schema)
    instance = error.instance
    if error.validator == "required":
        missing = next(k for k in error.validator_value if k not in instance)
        hint = _annotation(schema.get("properties", {}).get(missing), "x-missing") or \
            _annotation(_defs().get(missing), "x-missing")
        return f"{_field(path + [missing])}: missing" + (f" ({hint})" if hint else "")
    if error.validator == "additionalProperties":
        known = list(schema.get("properties", {}))
        unknown = sorted(set(instance) - set(known))[0]
        return f"{_field(path + [unknown])}: unknown field (expected {', '.join(known)})"
    template = schema.get("x-messages", {}).get(error.validator)
    prefix = f"{_field(path)}: " if path else ""
    if template is not None:
        parent = _at(root, path[:-1])
        return prefix + template.format(instance=instance, shown=_show(instance),
                                        limit=error.validator_value, parent=parent)
    expected = schema.get("x-expected")
    if expected is None:
        return prefix + error.message
    got = _kind(instance) if error.validator == "type" else _show(instance)
    return f"{prefix}expected {expected}, got {got}"


@cache
def _defs() -> dict:
    return _validator().schema["$defs"]


def _resolved(schema: Any) -> dict:
    """A subschema with the annotations of the definition it refers to."""
    if not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        return {**_resolved(_defs()[ref.removeprefix("#/$defs/")]), **schema}
    return schema


def _annotation(schema: Any, key: str) -> str | None:
    return _resolved(schema).get(key)


def _at(root: Any, path: list) -> Any:
    for key in path:
        root = root[key]
    return root


def _field(path: list) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


class _Parser:
    """The launch from JSON the schema accepted: every value checked against
    its element type, threads per block and per launch against their limits."""

    def __init__(self, where: str):
        self.where = where

    def error(self, field_name: str, message: str) -> LaunchError:
        return LaunchError(f"{field_name}: {message}" if field_name else message, self.where)

    def launch(self, obj: dict) -> Launch:
        grid, block = self.dims(obj["grid"]), self.dims(obj["block"])
        threads = block[0] * block[1] * block[2]
        if threads > MAX_BLOCK_THREADS:
            raise self.error("block", f"{_spell(block)} threads exceed CUDA's limit of "
                             f"{MAX_BLOCK_THREADS} threads per block")
        total = threads * grid[0] * grid[1] * grid[2]
        if total > MAX_LAUNCH_THREADS:
            raise self.error("", f"the launch has {total} threads ({_spell(grid)} CTAs of "
                             f"{_spell(block)} threads), past qgc's limit of "
                             f"{MAX_LAUNCH_THREADS} threads per launch by "
                             f"{total - MAX_LAUNCH_THREADS}")
        if "params" in obj:
            args = [self.param(p, f"params[{i}]") for i, p in enumerate(obj["params"])]
        else:
            args = [self.arg(a, f"args[{i}]") for i, a in enumerate(obj["args"])]
        return Launch(obj.get("kernel"), grid, block, args, obj.get("dynamic_shared_bytes", 0))

    @staticmethod
    def dims(value: int | list[int]) -> tuple[int, int, int]:
        padded = ([value] if _is_int(value) else list(value)) + [1, 1]
        return padded[0], padded[1], padded[2]

    def arg(self, item: dict, path: str) -> Arg:
        spelled, name = item["type"], item.get("name")
        if spelled.endswith("*"):
            return self.buffer(spelled[:-1], item, path, name)
        return Arg(spelled, False, value=self.scalar(spelled, item["value"], f"{path}.value"),
                   name=name)

    def param(self, item: dict, path: str) -> Arg:
        name = item.get("name")
        if item["kind"] == "ptr":
            return self.buffer(item["elem"], item, path, name)
        elem = item["type"]
        return Arg(elem, False, value=self.scalar(elem, item["value"], f"{path}.value"),
                   name=name)

    def buffer(self, elem: str, item: dict, path: str, name: str | None) -> Arg:
        values = [self.scalar(elem, v, f"{path}.data[{i}]") for i, v in enumerate(item["data"])]
        return Arg(elem, True, data=values, offset=item.get("offset", 0), name=name)

    def scalar(self, elem: str, value: Any, path: str) -> int | float:
        if elem in ("f32", "f64"):
            return self.float_value(elem, value, path)
        if not _is_int(value):
            raise self.error(path, f"expected an integer ({elem}), got {_show(value)}")
        bits = TYPE_SIZES[elem] * 8
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if elem[0] == "s" \
            else (0, (1 << bits) - 1)
        if not lo <= value <= hi:
            raise self.error(path, f"{_show(value)} does not fit {elem} ({lo}..{hi})")
        return value

    def float_value(self, elem: str, value: Any, path: str) -> float:
        """An f32 or f64 value: a JSON number within the type's range (an
        f32 rounds to the nearest float32) or "nan", "inf", "-inf"."""
        if isinstance(value, str) and value in FLOAT_STRINGS:
            return FLOAT_STRINGS[value]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(path, f"expected a number or \"nan\", \"inf\", \"-inf\" ({elem}), "
                             f"got {_show(value)}")
        try:
            x = float(value)
            struct.pack("<f" if elem == "f32" else "<d", x)
        except (OverflowError, ValueError):
            largest = "3.4028235e+38" if elem == "f32" else "1.7976931348623157e+308"
            raise self.error(path, f"{_show(value)} does not fit {elem} (largest finite "
                             f"magnitude {largest})") from None
        return x


def _spell(dims: tuple[int, int, int]) -> str:
    return "x".join(map(str, dims))


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
        return f"the string {_show(value)}"
    if isinstance(value, int | float):
        return f"the number {_show(value)}"
    return type(value).__name__


def _show(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = f"a {type(value).__name__}"
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
