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


def _hypothesis_profiles() -> None:
    """No deadlines and no speed health checks (a loaded 2-core machine is slow);
    under CI, derandomized so that a red run can be re-run the same."""
    from hypothesis import HealthCheck, settings

    base = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", **base)
    settings.register_profile("ci", derandomize=True, database=None, **base)
    settings.load_profile("ci" if os.environ.get("CI") else "dev")


_hypothesis_profiles()
