"""What the `qgc` commands share: the base-model flags and stderr notes."""

from __future__ import annotations

import argparse
import os
import sys


def say(message: str) -> None:
    print(f"qgc: {message}", file=sys.stderr)


def add_base_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base", default=os.environ.get("QGC_BASE"),
                   help="local Qwen3.5 checkpoint directory (default: $QGC_BASE, else a "
                        "seeded stand-in)")
    p.add_argument("--base-config", metavar="PATH",
                   help="without --base: the text config of the seeded stand-in (default: "
                        "the 2B config)")
