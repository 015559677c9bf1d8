"""What the fuzz tests share: JSON inputs damaged the ways files get damaged,
and the CLI run in-process with its output captured."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from hypothesis import strategies as st

from qgc.cli import main


def damaged_json(draw, value: Any, intact: int = 5) -> bytes:
    """`value` as JSON (`intact` times in `intact` + 3), else that text cut
    short, one byte of it replaced, or random bytes."""
    kind = draw(st.sampled_from(["json"] * intact + ["truncated", "byte", "random"]))
    if kind == "random":
        return draw(st.binary(max_size=200))
    raw = json.dumps(value).encode()
    if kind == "truncated":
        return raw[:draw(st.integers(min_value=0, max_value=len(raw) - 1))]
    if kind == "byte":
        at = draw(st.integers(min_value=0, max_value=len(raw) - 1))
        return raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1:]
    return raw


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """`qgc ARGV` in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()
