"""Expected-result files (`qgc run --expect FILE`): a launch's result buffers
compared with them bit for bit.

Two forms are read (docs/launch.md):

- the result JSON itself, as every example's ``expected.json``:
  ``{"buffers": [[1, 2, 3], [4, 5, 6], [32], null]}``, one entry per kernel
  argument, null for a scalar;
- the shared kernel suite's ``NAME.json``: ``"expected": {name: [...]}`` by
  parameter name (``"expected_warp4"`` instead on 4-lane warps where it is
  given), with its per-buffer ``"checks"`` (``dont_care``, ``allowed``,
  ``multiset_prefix``, ``atol``/``rtol``) where the suite allows a margin.

Integers compare by value, f32 values by their bits (``-0.0`` is not ``0.0``;
every NaN is ``"nan"``, as the result JSON prints it).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qgc.diagnostics import QgcError
from qgc.runtime.launch import (
    FLOAT_STRINGS,
    Launch,
    _json_value,
    _Parser,
    _show,
    read_json,
)

#: The warp size the suite's plain `expected` holds (real CUDA warps).
CUDA_WARP = 32


@dataclass
class Expectation:
    """What one buffer (argument `index`) must hold; `check` holds the suite's
    margins for it (empty: bit for bit)."""

    index: int
    values: list
    check: dict = field(default_factory=dict)


class MismatchError(QgcError):
    """The buffers differ from the expected file (exit status 1)."""

    def __init__(self, message: str, source: str):
        super().__init__(f"{source}: error: {message}", status=1)


def load_expected(path: str | Path, launch: Launch, warp_size: int) -> list[Expectation]:
    """The expectations of an expected-result file for `launch`'s buffers."""
    obj, where = read_json(path, None, "expected-result file")
    reader = _Parser(where)
    if isinstance(obj, dict) and "buffers" in obj:
        return _result_form(obj["buffers"], launch, reader)
    if isinstance(obj, dict) and "expected" in obj:
        return _suite_form(obj, launch, warp_size, reader)
    raise reader.error("", "expected an object with \"buffers\" (the result JSON) or "
                           "\"expected\" (a kernel suite file)")


def _result_form(entries: Any, launch: Launch, reader: _Parser) -> list[Expectation]:
    args = launch.args
    if not isinstance(entries, list) or len(entries) != len(args):
        raise reader.error("buffers", f"expected a list of {len(args)} entries, one per "
                                      f"argument of the launch, got {_show(entries)}")
    out = []
    for i, (arg, entry) in enumerate(zip(args, entries, strict=True)):
        if not arg.pointer:
            if entry is not None:
                raise reader.error(f"buffers[{i}]", f"expected null (args[{i}] is a scalar), "
                                                    f"got {_show(entry)}")
            continue
        out.append(Expectation(i, _values(reader, arg.type, entry, f"buffers[{i}]")))
    return out


def _suite_form(obj: dict, launch: Launch, warp_size: int,
                reader: _Parser) -> list[Expectation]:
    key = "expected_warp4" if warp_size == 4 and "expected_warp4" in obj else "expected"
    if key == "expected" and "expected_warp4" in obj and warp_size != CUDA_WARP:
        raise reader.error("", f"the expected results are for 4- and {CUDA_WARP}-lane warps; "
                               f"this run has {warp_size}-lane warps")
    expected, checks = obj[key], obj.get("checks", {})
    if not isinstance(expected, dict):
        raise reader.error(key, f"expected an object of buffers by name, got {_show(expected)}")
    if not isinstance(checks, dict):
        raise reader.error("checks", f"expected an object, got {_show(checks)}")
    index = {arg.name: i for i, arg in enumerate(launch.args) if arg.pointer and arg.name}
    out = []
    for name, values in expected.items():
        if name not in index:
            raise reader.error(f"{key}.{name}", "no buffer of the launch has this name "
                               f"(buffers: {', '.join(index) or 'none named'})")
        i = index[name]
        check = checks.get(name, {})
        if not isinstance(check, dict):
            raise reader.error(f"checks.{name}", f"expected an object, got {_show(check)}")
        out.append(Expectation(i, _values(reader, launch.args[i].type, values,
                                          f"{key}.{name}"), check))
    return out


def _values(reader: _Parser, elem: str, entry: Any, path: str) -> list:
    if not isinstance(entry, list):
        raise reader.error(path, f"expected a list of {elem} values, got {_show(entry)}")
    return [reader.scalar(elem, v, f"{path}[{k}]") for k, v in enumerate(entry)]


# ------------------------------------------------------------------ comparing

def check_expected(path: str | Path, launch: Launch, buffers: list[list | None],
                   warp_size: int = 4) -> int:
    """Compare `buffers` (the run's result) with the file at `path`; returns
    how many buffers were compared, or raises `MismatchError` naming the first
    difference (and how many elements of that buffer differ)."""
    return compare(load_expected(path, launch, warp_size), launch, buffers, str(path))


def compare(expectations: list[Expectation], launch: Launch, buffers: list[list | None],
            where: str) -> int:
    """`check_expected` with the file read already (`load_expected`): a bad
    file is said before the run, a difference after it."""
    for e in expectations:
        arg, got = launch.args[e.index], buffers[e.index] or []
        label = f"args[{e.index}]" + (f" '{arg.name}'" if arg.name else "")
        if len(got) != len(e.values):
            raise MismatchError(f"{label}: expected {len(e.values)} elements, got {len(got)}",
                                where)
        wrong = differences(arg.type, e.values, got, e.check)
        if wrong:
            k = wrong[0]
            more = f" ({len(wrong)} of {len(got)} elements differ)" if len(wrong) > 1 else ""
            raise MismatchError(f"{label}[{k}]: expected {_spelled(e.values[k])}, got "
                                f"{_spelled(got[k])}{more}", where)
    return len(expectations)


def differences(elem: str, want: list, got: list, check: dict | None = None) -> list[int]:
    """The indices where `got` differs from `want` (with the suite's `check`)."""
    check = check or {}
    key = _f32_key if elem == "f32" else (lambda v: v)
    skip = _dont_care(check, len(want))
    prefix = check.get("multiset_prefix", 0)
    wrong: list[int] = []
    if isinstance(prefix, int) and prefix > 0:
        if sorted(map(key, got[:prefix]), key=repr) != sorted(map(key, want[:prefix]), key=repr):
            wrong = [k for k in range(min(prefix, len(want))) if key(got[k]) != key(want[k])]
        skip |= set(range(prefix))
    allowed = check.get("allowed", {})
    for k, (w, g) in enumerate(zip(want, got, strict=True)):
        if k in skip or key(g) == key(w):
            continue
        options = allowed.get(str(k)) if isinstance(allowed, dict) else None
        if isinstance(options, list) and key(g) in {key(v) for v in options
                                                    if isinstance(v, int | float | str)}:
            continue
        if elem == "f32" and _close(g, w, check):
            continue
        wrong.append(k)
    return sorted(wrong)


def _dont_care(check: dict, n: int) -> set[int]:
    dont_care = check.get("dont_care", [])
    if dont_care is True:
        return set(range(n))
    return {k for k in dont_care if isinstance(k, int)} if isinstance(dont_care, list) else set()


def _close(got: float, want: float, check: dict) -> bool:
    atol, rtol = check.get("atol", 0), check.get("rtol", 0)
    if not all(isinstance(t, int | float) and not isinstance(t, bool) for t in (atol, rtol)) \
            or atol == rtol == 0:
        return False
    if math.isnan(got) or math.isnan(want):
        return False
    return abs(got - want) <= atol + rtol * abs(want)


def _f32_key(value) -> int | str:
    """An f32 value by its bits; every NaN alike (the result JSON's "nan"); a
    value no f32 has (an `allowed` entry of the suite) by its spelling."""
    if isinstance(value, str):
        value = FLOAT_STRINGS.get(value, value)
    try:
        value = float(value)
        return "nan" if math.isnan(value) else struct.unpack("<I", struct.pack("<f", value))[0]
    except (TypeError, ValueError, OverflowError):
        return repr(value)


def _spelled(value) -> str:
    return _show(_json_value(value))
