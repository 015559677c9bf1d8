"""Print the simt machine's resources per kernel as a Markdown table (for
docs/machine.md): blocks, largest block, registers (spilled), predicates,
memory words of the launch, EXEC steps. `python scripts/simt_resources.py`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "kernels"


def launches() -> list[tuple[str, Path, Path]]:
    out = []
    for d in sorted((REPO / "examples").iterdir()):
        if (d / "launch.json").exists():
            out += [(f"{d.name} ({c})", d / f"{d.name}{s}", d / "launch.json")
                    for c, s in (("nvcc", ".ptx"), ("clang", ".clang.ptx"))]
    for spec in sorted(SHARED.glob("*.json")):
        if json.loads(spec.read_text())["kind"] == "int":
            out += [(f"{spec.stem} ({c})", SHARED / f"{spec.stem}{s}", spec)
                    for c, s in (("nvcc", ".ptx"), ("clang", ".clang.ptx"))]
    return out


def row(name: str, ptx: Path, launch_path: Path) -> str | None:
    from qgc import driver
    from qgc.diagnostics import QgcError
    from qgc.dialects import simt
    from qgc.pipeline import stage
    from qgc.runtime.launch import load_launch
    from qgc.runtime.simt_engine import run_simt
    from qgc.stats import simt_kernel_stats

    ctx, module = driver.load(str(ptx))
    try:
        driver.apply(ctx, module, stage("simt"))
    except QgcError:
        return None
    (kernel,) = simt.kernels_of(module)
    s = simt_kernel_stats(kernel)
    result = run_simt(module, load_launch(launch_path))
    words = sum(result.stats["memory"].values())
    return (f"| {name} | {s['blocks']} | {s['max_ops']} | {s['registers']} "
            f"({s['spilled']}) | {s['predicates']} | {words} | "
            f"{result.stats['exec_steps']} |")


def main() -> int:
    print("| kernel | blocks | largest block | registers (spilled) | predicates "
          "| memory words | EXEC steps |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, ptx, launch in launches():
        line = row(name, ptx, launch)
        if line:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
