"""The text mute (runtime/text_mute.py): the plan's guarantees on every
embedding row, and `qgc drift` with and without it on a small stand-in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import small_base_config  # noqa: E402
from qgc.cli import main  # noqa: E402
from qgc.runtime import text_mute as TM  # noqa: E402

DOT = Path(__file__).resolve().parents[1] / "examples" / "dot" / "dot.ptx"


def test_free_coordinates_avoid_gpu_rows_and_writes():
    rows = torch.zeros(3, 8)
    rows[0, 1], rows[2, 5] = 8.0, -1.0
    assert TM.free_coordinates(rows, written={2, 7}) == [0, 3, 4, 6]


def test_the_plan_marks_every_row_and_removes_the_mark():
    """On seeded rows (the stand-in's init scale): every row's marker
    coordinate ends at least MARK_FLOOR·rms above 0 at the compiled layers,
    the scale is a bfloat16 value, and the fitted removal leaves little."""
    g = torch.Generator().manual_seed(1)
    embedding = torch.randn(20_000, 256, generator=g) * 0.02
    free = list(range(64, 256))
    plan = TM.plan(embedding, free, 1e-6, max_squares=100)
    assert plan.marker in free and plan.marker not in plan.squares
    assert len(plan.squares) == 100 and set(plan.squares) <= set(free)
    assert float(torch.tensor(plan.scale).to(torch.bfloat16)) == plan.scale
    h = embedding.double()
    r = (h.pow(2).mean(1) + 1e-6).sqrt()
    mark = plan.scale * (h[:, plan.squares] / r[:, None]).pow(2).sum(1)
    after = h.clone()
    after[:, plan.marker] += mark
    r_after = (after.pow(2).mean(1) + 1e-6).sqrt()
    x_c = after[:, plan.marker] / r_after
    assert float(x_c.min()) >= TM.MARK_FLOOR * 0.9 and abs(float(x_c.min()) - plan.min_mark) < 1e-9
    removal = plan.removal[0] * (after[:, plan.squares] / r_after[:, None]).pow(2).sum(1) + \
        plan.removal[1] * x_c.pow(2)
    left = ((mark - removal) / h.norm(dim=1)).abs()
    assert abs(float(left.max()) - plan.report["max_change"]) < 1e-9
    naive = ((mark - plan.scale * (after[:, plan.squares] / r_after[:, None]).pow(2).sum(1))
             / h.norm(dim=1)).abs()
    # hidden 256: the mark is ~⅓ of |h|; the fit beats taking the squares out again
    assert plan.report["max_change"] < 0.05 and float(naive.max()) > 2 * plan.report["max_change"]


def test_no_free_coordinate_no_plan():
    assert TM.plan(torch.randn(10, 8), [3], 1e-6, 10) is None


def small_config(tmp_path: Path) -> Path:
    return small_base_config(tmp_path, hidden=1024)


def drift(capsys, config: Path, *flags: str) -> dict[str, float]:
    assert main(["drift", str(DOT), "--base-config", str(config), "--dtypes", "float32",
                 "--sequences", "2", "--length", "12", *flags]) == 0
    out = capsys.readouterr().out
    return {m[1]: float(m[2]) for m in re.finditer(r"^(\S+) float32 (\S+)$", out, re.M)}


def test_drift_with_the_mute(tmp_path, capsys):
    """With the mute, the next text token's distribution barely moves and
    greedy agrees. (On this 512-row stand-in the GPU tokens' near-zero
    logits take most of the flat distribution's mass: `KL` over the whole
    vocabulary is large for that reason alone.)"""
    torch.set_num_threads(2)
    muted = drift(capsys, small_config(tmp_path))
    assert set(muted) == {"KL", "KL-text", "gpu-mass", "top1", "residual"}
    assert muted["residual"] < 1e-2 and muted["KL-text"] < 1e-5
    assert muted["top1"] == 1.0


@pytest.mark.full
def test_drift_without_the_mute(tmp_path, capsys):
    """Without it the compiled layers wreck text: the residual moves by
    hundreds of times its norm."""
    torch.set_num_threads(2)
    raw = drift(capsys, small_config(tmp_path), "--no-mute")
    assert raw["residual"] > 10 and raw["KL-text"] > 1e-2
