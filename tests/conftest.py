"""Shared fixtures: where the examples and the shared kernel suite live."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
SHARED = Path(os.environ.get("QGC_SHARED", REPO.parent / "shared"))
SHARED_KERNELS = SHARED / "kernels"


def example_dirs() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if (p / "launch.json").exists())


def all_ptx_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*/*.ptx")) + sorted(SHARED_KERNELS.glob("*.ptx"))


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
    `pytestmark = pytest.mark.usefixtures("two_torch_threads")`)."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


#: Text rows of the small stand-ins' vocabulary (GPU rows come after them).
SMALL_VOCAB = 512


def small_base_config(directory: Path, hidden: int = 2048, **changes) -> Path:
    """A Qwen3.5 text config for a fast stand-in, written to directory/config.json:
    the 2B's (hidden 2048) or the 0.8B's layer shape (hidden 1024), two base
    layers (one linear, one full attention: a cache needs one), a 512-row
    vocabulary."""
    import json
    data = json.loads((SHARED / "qwen3_5_2b_text_config.json").read_text())
    data.update(hidden_size=hidden, intermediate_size={1024: 3584, 2048: 6144}[hidden],
                num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
                vocab_size=SMALL_VOCAB, bos_token_id=None, eos_token_id=None)
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
        try:
            driver.apply(make_context(), module, pipeline)
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
