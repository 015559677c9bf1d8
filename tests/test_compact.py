"""The `compact` engine (runtime/compact.py, and its compiled step in
runtime/compact_numba.py): the compiled layers' non-zero weights in the stock
layer math give the ideal `tensor` engine's trace token for token, in both
backends, on every example and kernel of the shared suite (CI: a few, on
the small stand-in; `make test-full`: all), and `qgc run --engine compact`
prints the kernel's buffers."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from made_up_plans import STREAMS, made_up_plan, torch_residuals
from test_model_kernels import cases

from conftest import EXAMPLES, REPO, small_base_config
from qgc.merged_model import compile_with_host
from qgc.runtime.compact import CompactPlan, CompactStepper
from qgc.runtime.compact_numba import NumbaStepper, ThreadedStepper
from qgc.runtime.model import load_text_config
from qgc.runtime.trace import run_trace, tensor_stepper

torch = pytest.importorskip("torch")

#: (kernel, compiler) CI runs (under a minute): a dot product, module
#: variables (the batch test below runs dot's launches of several lengths)
COMPACT_IN_CI = {("dot", "nvcc"), ("device_globals", "clang")}


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    return {h: load_text_config(small_base_config(tmp_path_factory.mktemp(f"base{h}"), h))
            for h in (1024, 2048)}


def _params():
    """(case, backend) pairs; CI runs numba on COMPACT_IN_CI and the torch
    form on dot (25 s at hidden 2048)."""
    for case in cases():
        if case.is_float and case.info is not None and case.name == "fastmath_f":
            continue       # 124 blocks, 144 layers: hours of ideal trace (test_model_kernels)
        for backend, name in ((NumbaStepper, "numba"), (CompactStepper, "torch")):
            in_ci = case.key in COMPACT_IN_CI and (name == "numba" or case.name == "dot")
            yield pytest.param(case, backend, marks=[] if in_ci else [pytest.mark.full],
                               id=f"{case.name}-{case.compiler}-h{case.hidden}-{name}")


_last_compiled: dict = {}


def _compiled(case, config):
    """A case's build and its ideal trace, kept for the next test (the two
    backends of a case run one after the other)."""
    if case.key not in _last_compiled:
        layers, kernel, program, vocab = compile_with_host(str(case.path), config, case.launch)
        ideal = run_trace(kernel, vocab, case.launch, tensor_stepper(program, vocab))
        _last_compiled.clear()
        _last_compiled[case.key] = layers, kernel, vocab, ideal, CompactPlan.of(layers, config)
    return _last_compiled[case.key]


@pytest.mark.parametrize("case, backend", list(_params()))
def test_compact_gives_the_tensor_engines_trace(configs, case, backend):
    layers, kernel, vocab, ideal, plan = _compiled(case, configs[case.hidden])
    got = run_trace(kernel, vocab, case.launch, backend(plan))
    assert [t.spelled() for t in got.tokens] == [t.spelled() for t in ideal.tokens]
    assert got.predicted == ideal.predicted
    case.check(got.buffers)
    assert 0 < plan.weights < layers.count * 2_000_000   # the non-zero part, not 58.8 M a layer


def test_a_plan_keeps_only_used_heads_and_neurons(configs):
    case = next(c for c in cases() if c.key == ("dot", "nvcc"))
    layers, _, _, _ = compile_with_host(str(case.path), configs[1024], case.launch)
    plan = CompactPlan.of(layers, configs[1024])
    heads = configs[1024].linear_num_value_heads
    assert 0 < plan.heads < heads * len(plan.layers)
    assert any(not layer.heads for layer in plan.layers)      # MLP-only layers
    for layer in plan.layers:
        assert len(layer.gate.rows) < configs[1024].intermediate_size


def test_qgc_run_engine_compact_prints_the_buffers(tmp_path):
    dot = EXAMPLES / "dot"
    proc = subprocess.run([sys.executable, "-m", "qgc.cli", "run", str(dot / "dot.ptx"),
                           "--launch", str(dot / "launch.json"), "--engine", "compact",
                           "--base-config", "small", "--stats=json"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["buffers"][2] == [32]
    stats = json.loads(proc.stderr.strip().splitlines()[-1])
    assert stats["engine"] == "compact" and stats["tokens"] > 0 and stats["heads"] > 0
    assert stats["verified"] is False      # the base layers did not run


def _dot(a: list[int], b: list[int], n: int | None = None) -> dict:
    """A launch of examples/dot (its JSON): a · b over n elements (all of a)."""
    return {"kernel": "dot", "grid": [1, 1, 1], "block": [4, 1, 1], "args": [
        {"type": "s32*", "data": a}, {"type": "s32*", "data": b},
        {"type": "s32*", "data": [0]}, {"type": "s32", "value": n or len(a)}]}


def _dot_launch(a: list[int], b: list[int], n: int | None = None):
    from qgc.runtime.launch import load_launch
    return load_launch(_dot(a, b, n))


@pytest.mark.parametrize("threads", [None, 2], ids=["one-stepper", "two-threads"])
def test_a_batch_gives_each_launch_its_own_trace(configs, threads):
    """Launches of different lengths in lockstep (`run_traces`, one numba
    batch, or its launches split between two threads' steppers): each trace
    and its buffers are the single launch's, and a launch that fails says so
    in its own row."""
    from qgc.runtime.memory import Trap
    from qgc.runtime.trace import run_traces
    dot = EXAMPLES / "dot" / "dot.ptx"
    inputs = [([1, 2, 3], [4, 5, 6]), ([7, -1], [3, 9]), ([5, 6, 7, 8], [1, 2, -2, 3])]
    launches = [_dot_launch(a, b) for a, b in inputs]
    layers, kernel, program, vocab = compile_with_host(str(dot), configs[1024], launches[2])
    plan = CompactPlan.of(layers, configs[1024])
    past_the_end = _dot_launch([1, 2], [3, 4], n=4)
    batch = len(launches) + 1
    stepper = NumbaStepper(plan, batch=batch) if threads is None else \
        ThreadedStepper(plan, batch, threads)
    *results, trap = run_traces(kernel, vocab, [*launches, past_the_end], stepper)
    assert isinstance(trap, Trap) and "outside buffer" in str(trap)
    for launch, (a, b), got in zip(launches, inputs, results, strict=True):
        ideal = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
        assert [t.spelled() for t in got.tokens] == [t.spelled() for t in ideal.tokens]
        assert got.buffers[2] == [sum(x * y for x, y in zip(a, b, strict=True))]
    assert len({len(r.tokens) for r in results}) == 3


def _launch_file(tmp_path, name: str, a: list[int], b: list[int], n: int | None = None) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(_dot(a, b, n)))
    return str(path)


def test_qgc_run_takes_a_batch_and_verifies_it(tmp_path, capsys):
    """`--launch` repeated: one result line per launch, a failed one as null
    with its trap on stderr and exit status 1; `--verify` feeds each trace to
    the stock merged model and says how many named tokens it checked. (In
    process: the command line itself is the previous test's.)"""
    from qgc.cli import main
    launches = [_launch_file(tmp_path, "a", [1, 2, 3], [4, 5, 6]),
                _launch_file(tmp_path, "b", [2, 2], [5, -1]),
                _launch_file(tmp_path, "c", [1, 2], [3, 4], n=4)]
    command = ["run", str(EXAMPLES / "dot" / "dot.ptx"), "--engine", "compact",
               "--base-config", "small", "--verify", "--stats=json"]
    assert main(command + [f"--launch={p}" for p in launches]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert [json.loads(line)["buffers"][2] for line in lines[:2]] == [[32], [8]]
    assert lines[2] == "null" and "c.json: trap: out-of-bounds" in err
    stats = json.loads(err.strip().splitlines()[-1])
    assert stats["launches"] == 3 and stats["failed"] == 1 and stats["verified"] is True
    assert stats["verified_tokens"] > 0 and "verify: the stock model (float32)" in err


def test_a_batch_is_the_compact_engines(tmp_path):
    a = _launch_file(tmp_path, "a", [1], [2])
    proc = subprocess.run([sys.executable, "-m", "qgc.cli", "run", str(EXAMPLES / "dot" / "dot.ptx"),
                           "--launch", a, "--launch", a, "--engine", "simt"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and "runs on --engine compact" in proc.stderr


@pytest.mark.parametrize("convolution", [True, False], ids=["convolution", "identity"])
def test_numba_gives_the_torch_residuals_on_a_made_up_plan(convolution):
    """What compiled layers lack (convolution taps, a decay; hidden 48):
    three launches with their own tokens in one numba batch, against the
    torch form's residuals after each token and its next ids."""
    plan = made_up_plan(convolution)
    want = torch.stack([torch_residuals(plan, list(s)) for s in STREAMS])   # (row, token, h)
    stepper = NumbaStepper(plan, batch=len(STREAMS))
    for t, ids in enumerate(STREAMS.T):
        named = stepper.step(ids)
        got = torch.from_numpy(stepper.h.T.copy())
        assert (got - want[:, t]).abs().max() <= 1e-5 * want.abs().max()
        assert (named == (want[:, t, plan.code] @ plan.codes.T).argmax(-1).numpy()).all()


def _silent_heads_plan() -> CompactPlan:
    """The made-up plan (no taps) with head 0 of its first layer (which
    decays) querying and head 1 keying only coordinate 3, which the even
    tokens' rows hold at 0: on those, head 0 reads nothing and head 1
    writes nothing, while the odd tokens read and write."""
    from qgc.runtime.compact import Block
    plan = made_up_plan(False)
    layer, dk = plan.layers[0], plan.layers[0].dk
    heads = len(layer.heads)
    w = layer.qkv.weight.to_dense() if layer.qkv.weight.layout == torch.sparse_csr \
        else layer.qkv.weight
    dense = torch.zeros(len(layer.qkv.rows), int(layer.qkv.cols.max()) + 1)
    dense[layer.qkv.filled[:, None], layer.qkv.cols[None, :]] = w
    for rows in (slice(0, dk), slice(heads * dk + dk, heads * dk + 2 * dk)):
        keep = dense[rows, 3].clone()
        dense[rows] = 0
        dense[rows, 3] = keep
    r, c = np.nonzero(dense.numpy())
    layer.qkv = Block.of(((r, c), dense.numpy()[r, c]), layer.qkv.rows.numpy())
    plan.rows[::2, 3] = 0
    return plan


def test_heads_with_a_silent_key_or_query_keep_the_torch_residuals():
    """A head whose key is zero on a token skips its delta rule there, one
    whose query is zero skips its read (the decay still applies): the
    torch form's residuals after each token, over launches that mix such
    tokens with ones that key and query."""
    plan = _silent_heads_plan()
    want = torch.stack([torch_residuals(plan, list(s)) for s in STREAMS])
    stepper = NumbaStepper(plan, batch=len(STREAMS))
    for t, ids in enumerate(STREAMS.T):
        stepper.step(ids)
        got = torch.from_numpy(stepper.h.T.copy())
        assert (got - want[:, t]).abs().max() <= 1e-5 * want.abs().max()


@pytest.mark.parametrize("convolution", [True, False], ids=["convolution", "identity"])
def test_a_prefill_takes_the_prompt_in_order(convolution):
    """A launch's prompt in one numba pass (its tokens as the columns of a
    step, sharing the launch's windows and states in order), then its last
    token: the torch form's residual after feeding them one by one, and its
    next id."""
    plan = made_up_plan(convolution)
    for stream in STREAMS:
        want = torch_residuals(plan, list(stream))[-1]
        stepper = NumbaStepper(plan)
        stepper.prefill_rows([0], [stream[:-1]])
        named = stepper.step(stream[-1:])
        got = torch.from_numpy(stepper.h[:, 0].copy())
        assert (got - want).abs().max() <= 1e-5 * want.abs().max()
        assert named[0] == int((want[plan.code] @ plan.codes.T).argmax())


@pytest.mark.parametrize("columns", [128, 3], ids=["one-pass", "passes-of-3"])
@pytest.mark.parametrize("convolution", [True, False], ids=["convolution", "identity"])
def test_prefill_rows_takes_each_launchs_prompt_in_order(convolution, columns, monkeypatch):
    """Prompts of different lengths for three launches of a batch, given in
    another order than their rows, in one `prefill_rows` (in passes of 3
    columns, a launch's prompt is split between passes), then each launch's
    last token in one step: each launch's residual is the torch form's after
    its own tokens one by one."""
    from qgc.runtime import compact_numba
    monkeypatch.setattr(compact_numba, "PREFILL_COLUMNS", columns)
    plan = made_up_plan(convolution)
    prompts = {2: STREAMS[2][:4], 0: STREAMS[0][:2], 1: STREAMS[1][:3]}
    stepper = NumbaStepper(plan, batch=3)
    stepper.prefill_rows(list(prompts), list(prompts.values()))
    last = np.array([STREAMS[row][len(prompts[row])] for row in range(3)])
    named = stepper.step(last)
    for row in range(3):
        want = torch_residuals(plan, [*prompts[row], last[row]])[-1]
        got = torch.from_numpy(stepper.h[:, row].copy())
        assert (got - want).abs().max() <= 1e-5 * want.abs().max()
        assert named[row] == int((want[plan.code] @ plan.codes.T).argmax())


def _examples():
    for case in cases():       # nvcc's (clang's give the same traces: the tests above)
        if case.info is None and case.compiler == "nvcc":
            yield pytest.param(case, id=f"{case.name}-{case.compiler}", marks=[pytest.mark.full])


@pytest.fixture(scope="module")
def base_2b():
    """The 2B stand-in in bfloat16, made once for every example (about 105 s
    and 5 GB); each merge moves its layers over and leaves their values."""
    from qgc.codegen import default_config_path
    from qgc.runtime.model import load_base
    config = load_text_config(default_config_path())
    return config, load_base(None, config, dtype=torch.bfloat16)


@pytest.mark.parametrize("case", list(_examples()))
def test_verified_mode_passes_at_the_2b_shape(case, base_2b):
    """`make test-full`: every example on the compact engine at the 2B shape,
    its trace then checked by the stock merged model in bfloat16, as `qgc run
    --engine compact --verify` checks it (the next test runs that command):
    the expected buffers, and every token the compact engine named is the
    model's argmax."""
    from qgc.runtime.model_engine import layers_model, replay_check
    config, base = base_2b
    layers, kernel, _, vocab = compile_with_host(str(case.path), config, case.launch)
    result = run_trace(kernel, vocab, case.launch, NumbaStepper(CompactPlan.of(layers, config)))
    case.check(result.buffers)
    model = layers_model(layers, base, torch.bfloat16)
    counts = replay_check(model, vocab, base.config.vocab_size, result.tokens, result.predicted)
    assert counts["checked"] > 0


@pytest.mark.full
def test_the_verify_flag_at_the_2b_shape():
    """`make test-full`: `qgc run --engine compact --verify` on the dot product
    at the 2B shape in bfloat16 (`make demo-2b`)."""
    dot = EXAMPLES / "dot"
    proc = subprocess.run([sys.executable, "-m", "qgc.cli", "run", str(dot / "dot.ptx"),
                           "--launch", str(dot / "launch.json"), "--engine", "compact",
                           "--base-config", "2b", "--verify", "--dtype", "bfloat16",
                           "--stats=json"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["buffers"][2] == [32]
    stats = json.loads(proc.stderr.strip().splitlines()[-1])
    assert stats["verified"] is True and stats["verified_tokens"] > 0


def test_a_pickled_plan_leaves_its_packing_behind():
    """What the numba backend caches on a plan is not pickled with it (a stale
    packing would outlive a change of the packing code): the loaded plan is
    packed again, to the same arrays."""
    import pickle

    from qgc.runtime.compact_numba import packed
    plan = made_up_plan(True)
    first = packed(plan)
    loaded = pickle.loads(pickle.dumps(plan))
    assert "_packed" not in vars(loaded)
    again = packed(loaded)
    assert again is not first
    assert all(np.array_equal(a, b) for a, b in zip(first.matrices, again.matrices, strict=True))


@pytest.mark.parametrize("convolution", [True, False], ids=["convolution", "identity"])
def test_a_heads_state_keeps_the_rows_and_columns_qkv_writes(convolution):
    """The numba step keeps a head's state only at the key channels the qkv
    projection writes (rows) and the value channels it writes (columns):
    after three launches' tokens the torch form's full states are 0
    everywhere else, and the kept entries are the numba step's."""
    from qgc.runtime.compact_numba import H_FIELDS, H_KEYS, H_ROW_OF, H_STATE, H_VALUES, HEAD_AT
    plan = made_up_plan(convolution)
    stepper = NumbaStepper(plan, batch=len(STREAMS))
    for column in STREAMS.T:
        stepper.step(column)
    reads, kept = stepper.packed.reads_a, 0
    for row, stream in enumerate(STREAMS):
        torch_form = CompactStepper(plan)
        for token in stream:
            torch_form.residual(int(token))
        for li, layer in enumerate(plan.layers):
            for hd in range(len(layer.heads)):
                at = stepper.packed.layers[li, HEAD_AT] + hd * H_FIELDS
                start, keys, row_of, values = (int(v) for v in reads[at:at + H_FIELDS][
                    [H_STATE, H_KEYS, H_ROW_OF, H_VALUES]])
                channels = np.flatnonzero(reads[row_of:row_of + layer.dk] >= 0)
                columns = reads[values + 1:values + 1 + reads[values]]
                assert len(channels) == keys < layer.dk and len(columns) < layer.dv
                full = torch_form.states[li][hd].numpy()
                packed = stepper.state[row, start:start + keys * len(columns)]
                unpacked = np.zeros_like(full)
                unpacked[np.ix_(channels, columns)] = packed.reshape(keys, len(columns))
                assert not np.delete(full, channels, axis=0).any()
                assert not np.delete(full, columns, axis=1).any()
                assert np.abs(unpacked - full).max() <= 1e-5 * np.abs(full).max()
                kept += int(np.count_nonzero(packed))
    assert kept > 0
