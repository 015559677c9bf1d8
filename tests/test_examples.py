"""Every example gives its expected buffers under the ref engine, bit for bit,
from both its nvcc and its clang PTX; and docs/ptx-coverage.md is current."""

import json
import struct

import pytest

from conftest import EXAMPLES, REPO, SHARED_KERNELS, example_dirs, needs_shared_kernels
from qgc.frontend import parse_ptx
from qgc.runtime.launch import load_launch
from qgc.runtime.ref import run_ref

# clang folds warpSize to 32: these have no defined answer on 4-lane warps.
WARP32_ONLY_UNDER_CLANG = {"vote_ballot", "warp_reduce_shfl"}


def _bits(buffers, launch):
    out = []
    for arg, values in zip(launch.args, buffers, strict=True):
        if values is None or arg.type != "f32":
            out.append(values)
        else:
            out.append([struct.unpack("<I", struct.pack("<f", v))[0] for v in values])
    return out


def _cases():
    for d in example_dirs():
        for compiler, suffix in (("nvcc", ".ptx"), ("clang", ".clang.ptx")):
            for warp in (4, 32):
                if warp == 4 and compiler == "clang" and d.name in WARP32_ONLY_UNDER_CLANG:
                    continue
                yield pytest.param(d, d / f"{d.name}{suffix}", warp,
                                   id=f"{d.name}-{compiler}-w{warp}")


@pytest.mark.parametrize("example, ptx_path, warp", list(_cases()))
def test_example_under_ref(example, ptx_path, warp):
    launch = load_launch(example / "launch.json")
    expected_file = example / "expected.json"
    if warp == 32 and (example / "expected_warp32.json").exists():
        expected_file = example / "expected_warp32.json"
    expected = json.loads(expected_file.read_text())["buffers"]
    result = run_ref(parse_ptx(ptx_path.read_text(), str(ptx_path)), launch, warp_size=warp)
    assert _bits(result.buffers, launch) == _bits(expected, launch)


def test_at_least_fifteen_examples():
    assert len(example_dirs()) >= 15


@needs_shared_kernels
def test_coverage_doc_is_current():
    from qgc.coverage_doc import kernel_files, render
    files = kernel_files([EXAMPLES, SHARED_KERNELS])
    assert (REPO / "docs" / "ptx-coverage.md").read_text() == render(files), \
        "docs/ptx-coverage.md is stale: run `make docs`"
