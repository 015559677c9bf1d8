"""Fingerprint what the compiler prints and writes, kernel by kernel, so a
change that promises "behaviour unchanged" can be proven byte-identical.

For every example and every kernel of ../shared/kernels, both compilers, it
runs the `qgc` command line and records the SHA-256 of stdout, stderr and the
exit status of

- `qgc K.ptx --emit=ptx`, `qgc K.ptx --emit=simt`;
- `qgc K.ptx -o K.safetensors --print-ir-after=tensor-schedule-layers`: the
  layers file's bytes (its JSON header in canonical order), and the tensor-level IR (the dump is `--emit=tensor`'s
  printer after the tensor stage's last pass; one compilation gives both, the
  schedule being the costly part).

    python scripts/fingerprint.py -o base.json             # record
    python scripts/fingerprint.py --compare base.json      # record again, compare
    python scripts/fingerprint.py --only 'dot|vector_add' --stages ptx,simt

`--python-path DIR` runs another checkout's compiler (a tree laid out as the
installed package, see `--help`); `--jobs N` runs N compilations at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_KERNELS = Path(os.environ.get("QGC_SHARED", REPO.parent / "shared")) / "kernels"
STAGES = ("ptx", "simt", "tensor")
#: runs the command line of whichever `qgc` package comes first on the path
QGC = [sys.executable, "-P", "-c", "import sys; from qgc.cli import main; sys.exit(main())"]


def kernels() -> list[tuple[str, Path]]:
    """(name, PTX) of every example and shared kernel, nvcc then clang."""
    found = []
    for ptx in sorted(REPO.glob("examples/*/*.ptx")) + sorted(SHARED_KERNELS.glob("*.ptx")):
        compiler = "clang" if ptx.name.endswith(".clang.ptx") else "nvcc"
        found.append((f"{ptx.name.split('.')[0]} ({compiler})", ptx))
    return found


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def layers_digest(data: bytes) -> str:
    """The digest of a safetensors file with its header in a canonical order:
    safetensors writes the metadata in hash-map order, which changes from run
    to run (the tensors' bytes and offsets do not)."""
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    return digest(json.dumps(header, sort_keys=True).encode() + data[8 + size:])


def run(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    done = subprocess.run(QGC + args, capture_output=True, env=env, cwd=REPO)
    return done, time.perf_counter() - start


def fingerprint(ptx: Path, stage: str, env: dict[str, str]) -> dict:
    if stage != "tensor":
        done, seconds = run([str(ptx), f"--emit={stage}"], env)
        return {"rc": done.returncode, "stdout": digest(done.stdout),
                "stderr": digest(done.stderr), "seconds": round(seconds, 1)}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "layers.safetensors"
        done, seconds = run([str(ptx), "-o", str(out),
                             "--print-ir-after=tensor-schedule-layers"], env)
        layers = layers_digest(out.read_bytes()) if out.exists() else None
    # the last line of stderr names the written file (a temporary path): drop it
    stderr = re.sub(rb"qgc: wrote \S+ ", b"qgc: wrote LAYERS ", done.stderr)
    return {"rc": done.returncode, "stdout": digest(done.stdout), "stderr": digest(stderr),
            "layers": layers, "seconds": round(seconds, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", help="write the fingerprints (JSON)")
    parser.add_argument("--compare", metavar="BASE.json",
                        help="compare with earlier fingerprints; exit 1 on a difference")
    parser.add_argument("--only", default="", help="regex over 'name (compiler)'")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--python-path", metavar="DIR",
                        help="put DIR first on PYTHONPATH (a `qgc` package laid out as installed)")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.python_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.python_path,
                                                           env.get("PYTHONPATH")]))
    stages = args.stages.split(",")
    base = json.loads(Path(args.compare).read_text()) if args.compare else {}
    work = [(f"{name} --emit={stage}", ptx, stage) for stage in stages
            for name, ptx in kernels() if re.search(args.only, name)]
    results: dict[str, dict] = {}
    differ = 0

    def one(item):
        key, ptx, stage = item
        return key, fingerprint(ptx, stage, env)

    with ThreadPoolExecutor(args.jobs) as pool:
        for key, found in pool.map(one, work):
            results[key] = found
            verdict = ""
            if key in base:
                same = {k: v for k, v in base[key].items() if k != "seconds"} == \
                       {k: v for k, v in found.items() if k != "seconds"}
                verdict = "identical" if same else "DIFFERENT"
                differ += not same
            print(f"{key}: rc {found['rc']}, {found['seconds']} s {verdict}", flush=True)
            if args.output:  # written as it goes: a long run can be read before it ends
                Path(args.output).write_text(json.dumps(results, indent=1, sort_keys=True))
    if args.compare:
        missing = [k for k in results if k not in base]
        print(f"{len(results) - differ - len(missing)} identical, {differ} different, "
              f"{len(missing)} not in the baseline")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
