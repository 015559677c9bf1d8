"""Compile time per kernel and stage, and the ratio to `--emit=ptx`, in one run.

    python bench/compile.py [--only REGEX] [--shared] [--stages ptx,simt,tensor,weights,o]
                            [--repeat N] [--json]

Each stage is one `qgc` command, timed as a user sees it (wall time, Python's
start-up and parsing included): `--emit=ptx`, `--emit=simt`, `--emit=tensor`,
`--emit=weights` (IR to /dev/null) and `-o layers.safetensors` (`o`, with the
file's size). The ratio to the same run's `--emit=ptx` time (start-up and
parsing) shows what the lowering costs, whatever the machine's speed. Kernels:
every example, both compilers; `--shared` adds ../shared/kernels (or
$QGC_SHARED/kernels). A stage that fails is shown as `rc N`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_KERNELS = Path(os.environ.get("QGC_SHARED", ROOT.parent / "shared")) / "kernels"
STAGES = ("ptx", "simt", "tensor", "weights", "o")
#: the command line of the `qgc` package first on the path, as a user runs it
QGC = [sys.executable, "-P", "-c", "import sys; from qgc.cli import main; sys.exit(main())"]


def kernels(shared: bool, only: str) -> list[tuple[str, Path]]:
    """(name (compiler), PTX) of every example, then the shared kernels."""
    paths = sorted(ROOT.glob("examples/*/*.ptx"))
    if shared:
        paths += sorted(SHARED_KERNELS.glob("*.ptx"))
    found = []
    for ptx in paths:
        compiler = "clang" if ptx.name.endswith(".clang.ptx") else "nvcc"
        name = f"{ptx.name.split('.')[0]} ({compiler})"
        if re.search(only, name):
            found.append((name, ptx))
    return found


def stage_args(ptx: Path, stage: str, out: Path) -> list[str]:
    return [str(ptx), "-o", str(out)] if stage == "o" else [str(ptx), f"--emit={stage}"]


def time_stage(ptx: Path, stage: str, repeat: int) -> dict:
    """Median wall seconds of the stage's command, its exit status, and for
    `o` the layers file's size in MB."""
    times, result = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "layers.safetensors"
        for _ in range(repeat):
            start = time.perf_counter()
            done = subprocess.run(QGC + stage_args(ptx, stage, out), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, cwd=ROOT)
            times.append(time.perf_counter() - start)
            if done.returncode:
                return {"rc": done.returncode, "error": done.stderr.decode().strip()[-300:]}
        result["seconds"] = statistics.median(times)
        if stage == "o":
            result["mb"] = out.stat().st_size / 1e6
    return result


def measure(name: str, ptx: Path, stages: list[str], repeat: int) -> dict:
    row: dict = {"kernel": name, "ptx": str(ptx.relative_to(ROOT) if ptx.is_relative_to(ROOT)
                                              else ptx), "stages": {}}
    for stage in stages:
        row["stages"][stage] = time_stage(ptx, stage, repeat)
    base = row["stages"].get("ptx", {}).get("seconds")
    for found in row["stages"].values():
        if base and "seconds" in found:
            found["ratio"] = found["seconds"] / base
    return row


def cell(found: dict) -> str:
    if "seconds" not in found:
        return f"rc {found['rc']}"
    ratio = f" ({found['ratio']:.1f}x)" if "ratio" in found else ""
    return f"{found['seconds']:.2f}{ratio}"


def print_table(rows: list[dict], stages: list[str]) -> None:
    heads = [("-o" if s == "o" else f"--emit={s}") for s in stages]
    width = max([len(r["kernel"]) for r in rows] + [6])
    print(f"{'kernel':<{width}} " + " ".join(f"{h:>16}" for h in heads)
          + ("  file MB" if "o" in stages else ""))
    for r in rows:
        line = f"{r['kernel']:<{width}} " + " ".join(f"{cell(r['stages'][s]):>16}"
                                                     for s in stages)
        if "o" in stages and "mb" in r["stages"]["o"]:
            line += f"  {r['stages']['o']['mb']:7.2f}"
        print(line, flush=True)
    print("seconds, wall, median of the runs; (N x): the ratio to the same kernel's "
          "--emit=ptx time")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="regex over 'name (compiler)'")
    p.add_argument("--shared", action="store_true", help="also the shared kernels")
    p.add_argument("--stages", default=",".join(STAGES),
                   help=f"comma-separated, of {', '.join(STAGES)} (o: -o layers.safetensors)")
    p.add_argument("--repeat", type=int, default=1, help="runs per stage (median)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout, for scripts")
    args = p.parse_args(argv)
    stages = args.stages.split(",")
    if unknown := [s for s in stages if s not in STAGES]:
        p.error(f"unknown stage {', '.join(unknown)} (stages: {', '.join(STAGES)})")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    found = kernels(args.shared, args.only)
    if not found:
        p.error(f"no kernel matches --only {args.only!r}")
    rows = []
    for name, ptx in found:
        rows.append(measure(name, ptx, stages, args.repeat))
        if not args.json:
            print(f"{name}: " + ", ".join(f"{s} {cell(rows[-1]['stages'][s])}" for s in stages),
                  file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"stages": stages, "repeat": args.repeat, "kernels": rows}, indent=1))
    else:
        print_table(rows, stages)
    failed = any("seconds" not in f for r in rows for f in r["stages"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
