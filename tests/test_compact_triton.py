"""The compact engine's Triton backend (runtime/compact_triton.py): a
kernel's trace through `TritonStepper` is the ideal `tensor` engine's token
for token, with the right buffers (CI: dot on the small stand-in at hidden
1024; `make test-full`: every example and kernel of the shared suite);
three launches in lockstep (two fed dot's trace, one another launch's), their
prompts in one pass, each name the next token of their own trace; and on
made-up plans with what compiled layers lack (causal convolution taps,
decay) three batch rows with their own tokens get the torch form's
residuals.

Without CUDA the kernels run in Triton's interpreter on CPU tensors, whether
triton was imported with TRITON_INTERPRET=1 or without it (a subprocess
runs the made-up plans the other way than this process); with CUDA they run
compiled. CI: about 30 s of one core under the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from made_up_plans import STREAMS, made_up_plan, torch_residuals
from test_model_kernels import cases

from conftest import REPO, small_base_config
from qgc.merged_model import compile_with_host
from qgc.runtime.launch import load_launch
from qgc.runtime.model import load_text_config
from qgc.runtime.trace import TraceResult, run_trace, tensor_stepper

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

from qgc.runtime import compact_triton  # noqa: E402
from qgc.runtime.compact import CompactPlan  # noqa: E402
from qgc.runtime.compact_triton import TritonStepper  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DOT = ("dot", "nvcc")
#: dot with other operands: the same layers, another trace (7·1 − 2·3 + 9·5)
OTHER_DOT = {"kernel": "dot", "grid": [1, 1, 1], "block": [4, 1, 1],
             "args": [{"type": "s32*", "data": [7, -2, 9]}, {"type": "s32*", "data": [1, 3, 5]},
                      {"type": "s32*", "data": [0]}, {"type": "s32", "value": 3}]}


@dataclass
class Compiled:
    plan: CompactPlan
    kernel: object
    program: object
    vocab: object
    ideal: TraceResult             # the tensor engine's trace


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """case → its `Compiled` (compiled once a module)."""
    configs, done = {}, {}

    def get(case) -> Compiled:
        if case.key not in done:
            if case.hidden not in configs:
                base = tmp_path_factory.mktemp(f"base{case.hidden}")
                configs[case.hidden] = load_text_config(small_base_config(base, case.hidden))
            config = configs[case.hidden]
            layers, kernel, program, vocab = compile_with_host(str(case.path), config, case.launch)
            ideal = run_trace(kernel, vocab, case.launch, tensor_stepper(program, vocab))
            done[case.key] = Compiled(CompactPlan.of(layers, config), kernel, program, vocab, ideal)
        return done[case.key]
    return get


def _params():
    for case in cases():
        if case.is_float and case.info is not None and case.name == "fastmath_f":
            continue       # 124 blocks, 144 layers: hours of ideal trace (test_model_kernels)
        marks = [] if case.key == DOT else [pytest.mark.full]
        yield pytest.param(case, id=f"{case.name}-{case.compiler}-h{case.hidden}", marks=marks)


@pytest.mark.parametrize("case", list(_params()))
def test_triton_gives_the_tensor_engines_trace(compiled, case):
    c = compiled(case)
    got = run_trace(c.kernel, c.vocab, case.launch, TritonStepper(c.plan, device=DEVICE))
    assert [t.spelled() for t in got.tokens] == [t.spelled() for t in c.ideal.tokens]
    assert got.predicted == c.ideal.predicted
    case.check(got.buffers)


@pytest.mark.full
def test_batch_rows_name_their_own_traces(compiled):
    """Teacher forcing: row r is fed trace r's tokens (a shorter trace's last
    one again after its end), the launch prompt in one pass, then a token a
    step; after each token the machine named, the row's next id is that
    token's."""
    dot = compiled(next(c for c in cases() if c.key == DOT))
    other = run_trace(dot.kernel, dot.vocab, load_launch(OTHER_DOT),
                      tensor_stepper(dot.program, dot.vocab))
    assert other.buffers[2] == [46]
    traces = [dot.ideal, dot.ideal, other]
    stepper = TritonStepper(dot.plan, batch=len(traces), device=DEVICE)
    streams = [[dot.vocab.id_of(t) for t in trace.tokens] for trace in traces]
    ids = np.array([s + s[-1:] * (max(map(len, streams)) - len(s)) for s in streams])
    prompt = dot.ideal.stats["prompt_tokens"]
    named = np.concatenate([stepper.steps(ids[:, :prompt])] +
                           [stepper.step(ids[:, i])[:, None] for i in range(prompt, ids.shape[1])],
                           axis=1)
    checked = 0
    for row, (trace, stream) in enumerate(zip(traces, streams, strict=True)):
        for i in range(1, len(stream)):
            if trace.predicted[i]:
                assert named[row, i - 1] == stream[i], f"row {row}, token {i}"
                checked += 1
    assert checked >= 3 * len(traces)


# ------------------------------------------------------ made-up plans
def made_up_error(convolution: bool, device: str = DEVICE) -> float:
    """Three batch rows, each with its own five tokens, on a made-up plan:
    the largest difference from the torch form's residuals (relative to the
    largest of them) after each token; the next ids must be the torch
    form's. With a convolution a token a step, else the five in one pass."""
    plan, streams = made_up_plan(convolution), STREAMS
    want = torch.stack([torch_residuals(plan, list(s)) for s in streams])   # (row, token, h)
    stepper = TritonStepper(plan, batch=len(streams), device=device)
    assert stepper.together is not convolution
    if convolution:
        named, got = [], []
        for ids in streams.T:
            named.append(stepper.step(ids))
            got.append(stepper._pass(1)[0].h[:len(streams), :stepper.hidden].cpu().clone())
        named, got = np.stack(named, axis=1), torch.stack(got, dim=1)
    else:
        named = stepper.steps(streams)
        got = stepper._pass(streams.shape[1])[0].h[:streams.size, :stepper.hidden].cpu()
    assert (named == (want[..., plan.code] @ plan.codes.T).argmax(-1).numpy()).all()
    return float((got.reshape(want.shape) - want).abs().max() / want.abs().max())


@pytest.mark.parametrize("convolution", [True, False], ids=["convolution", "tokens-together"])
def test_a_made_up_plan_gives_the_torch_residuals(convolution):
    assert made_up_error(convolution) < 1e-4


@pytest.mark.skipif(DEVICE != "cpu", reason="the interpreter runs on CPU tensors")
def test_the_interpreter_runs_the_kernels_however_triton_was_imported():
    """This process decorated the kernels as TRITON_INTERPRET has it; a
    subprocess decorates them the other way and runs the made-up plans."""
    here = compact_triton._interpreted(compact_triton._sparse_rows)
    code = ("import sys; sys.path.insert(0, 'tests'); "
            "from qgc.runtime import compact_triton as t; "
            f"assert t._interpreted(t._sparse_rows) is {not here}; "
            "import test_compact_triton as m; "
            "print(max(m.made_up_error(c, 'cpu') for c in (True, False)))")
    env = dict(os.environ, TRITON_INTERPRET="0" if here else "1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.split()[-1]) < 1e-4
