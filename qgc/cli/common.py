"""What the `qgc` commands share: the base-model flags and stderr notes."""

from __future__ import annotations

import argparse
import os
import sys

from qgc.base_config import CHOICES


def say(message: str) -> None:
    print(f"qgc: {message}", file=sys.stderr)


def add_base_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base", default=os.environ.get("QGC_BASE"),
                   help="local Qwen3.5 checkpoint directory (default: $QGC_BASE, else a "
                        "seeded stand-in)")
    p.add_argument("--base-config", metavar=CHOICES,
                   help="without --base: the text config of the seeded stand-in, a shipped "
                        "one by name (2b: Qwen3.5-2B, the default; 0.8b: the Qwen3.5-0.8B "
                        "shape; small: two base layers, for tests) or a JSON file or "
                        "checkpoint directory")
