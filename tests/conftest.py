"""Shared fixtures: where the examples and the shared kernel suite live.

The project is self-contained: the base configs ship in the package
(`qgc/configs/`). Only the shared kernel suite lives outside, in
`../shared/kernels` (or `$QGC_SHARED/kernels`); without it the tests that need
it skip, and the session ends with one line that counts them."""

import json
import os
from pathlib import Path

import pytest

from qgc.base_config import resolve_config_path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
SHARED = Path(os.environ.get("QGC_SHARED", REPO.parent / "shared"))
SHARED_KERNELS = SHARED / "kernels"
#: The skip reason of every test that needs the shared kernel suite.
NO_SHARED_KERNELS = f"{SHARED_KERNELS} not found (set QGC_SHARED)"
#: Marks a test that needs the shared kernel suite.
needs_shared_kernels = pytest.mark.skipif(not SHARED_KERNELS.is_dir(), reason=NO_SHARED_KERNELS)
#: The Qwen3.5-2B text config the package ships (the default base).
BASE_2B = resolve_config_path("2b")


def shared_params(params: list, argcount: int = 1) -> list:
    """The parameters of a test over the shared kernel suite; without the suite,
    one skipped placeholder, so that the skip is said and counted."""
    if SHARED_KERNELS.is_dir():
        return params
    return [pytest.param(*[None] * argcount, id="no-shared-kernels",
                         marks=pytest.mark.skip(reason=NO_SHARED_KERNELS))]


#: The user property a fuzz test records its count of inputs under
#: (`record_property(FUZZ_INPUTS, n)`: it reaches the summary under xdist too).
FUZZ_INPUTS = "fuzz_inputs"


def pytest_terminal_summary(terminalreporter) -> None:
    """One line: how many tests skipped for want of the shared kernel suite;
    one line: how many inputs the fuzz tests tried."""
    stats = terminalreporter.stats
    skipped = [r for r in stats.get("skipped", [])
               if NO_SHARED_KERNELS in str(getattr(r, "longrepr", ""))]
    if skipped:
        terminalreporter.write_line(f"qgc: {len(skipped)} tests skipped: {NO_SHARED_KERNELS}")
    tried = {r.nodeid: value for key in ("passed", "failed") for r in stats.get(key, [])
             for name, value in getattr(r, "user_properties", ()) if name == FUZZ_INPUTS}
    if tried:
        terminalreporter.write_line(f"qgc: the fuzz tests tried {sum(tried.values())} inputs "
                                    f"({len(tried)} tests)")


def example_dirs() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if (p / "launch.json").exists())


def all_ptx_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*/*.ptx")) + shared_kernel_files()


def shared_kernel_files() -> list[Path]:
    return sorted(SHARED_KERNELS.glob("*.ptx"))


@pytest.fixture(scope="session")
def ctx():
    from qgc.context import make_context
    return make_context()


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small matmuls on a shared 2-core machine: threads only cost (modules opt
    in with `pytestmark = pytest.mark.usefixtures("one_torch_thread")`)."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def two_torch_threads():
    """The model tests' large matmuls: both cores (modules opt in with
    `pytestmark = pytest.mark.usefixtures("two_torch_threads")`), a core each
    under xdist (two workers with two threads each would spin against each
    other), or `QGC_TEST_TORCH_THREADS` of them (1 to run two long tests side
    by side, each on a core of its own)."""
    import torch
    n = torch.get_num_threads()
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    share = max(1, min(2, len(os.sched_getaffinity(0)) // workers))
    torch.set_num_threads(int(os.environ.get("QGC_TEST_TORCH_THREADS", share)))
    yield
    torch.set_num_threads(n)


#: Text rows of the small stand-ins' vocabulary (GPU rows come after them).
SMALL_VOCAB = json.loads(resolve_config_path("small").read_text())["vocab_size"]


def small_base_config(directory: Path, hidden: int = 2048, **changes) -> Path:
    """A Qwen3.5 text config for a fast stand-in, written to directory/config.json:
    the shipped `small` config (two base layers, one linear, one full attention:
    a cache needs one; a 512-row vocabulary) at the 2B's layer shape (hidden
    2048) or the 0.8B's (hidden 1024, as shipped)."""
    data = json.loads(resolve_config_path("small").read_text())
    data.update(hidden_size=hidden, intermediate_size={1024: 3584, 2048: 6144}[hidden])
    data.update(changes)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(data))
    return directory / "config.json"


def _hypothesis_profiles() -> None:
    """No deadlines and no speed health checks (a loaded 2-core machine is slow);
    under CI, derandomized so that a red run can be re-run the same."""
    from hypothesis import HealthCheck, settings

    base = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", **base)
    settings.register_profile("ci", derandomize=True, database=None, **base)
    settings.load_profile("ci" if os.environ.get("CI") else "dev")


_hypothesis_profiles()


def on_random_programs(families: list[str], examples: int, pipeline, check,
                       refusals: tuple[str, ...] = ("is not yet supported by the machine",)
                       ) -> int:
    """Draw programs of the tests/ptxgen `families`, compile each with
    `pipeline` and call `check(program, module, launch)`. A program the
    pipeline refuses must say why with one of `refusals`; a launch past the
    machine's memory must name the limit. Returns how many programs ran."""
    hypothesis = pytest.importorskip("hypothesis")

    from ptxgen import programs
    from qgc import driver
    from qgc.context import make_context
    from qgc.diagnostics import QgcError
    from qgc.frontend import parse_ptx
    from qgc.runtime.launch import LaunchError, load_launch
    ran = [0]

    @hypothesis.settings(max_examples=examples, deadline=None, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(hypothesis.strategies.sampled_from(families).flatmap(programs))
    def one(p):
        module = parse_ptx(p.ptx, "gen.ptx")
        try:      # verified after every pass: odd programs find passes' slips
            driver.apply(make_context(), module, pipeline, verify_each=True)
        except QgcError as err:
            assert any(r in str(err) for r in refusals), str(err)
            return
        launch = load_launch(p.launch)
        try:
            check(p, module, launch)
        except LaunchError as err:  # buffers past the machine's memory: a limit, said so
            assert "(option mem-words)" in str(err), str(err)
            return
        ran[0] += 1

    one()
    return ran[0]
