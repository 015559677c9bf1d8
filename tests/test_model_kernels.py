"""Every kernel through the merged model: each example of
`test_simt.accepted_cases` and each kernel of the shared suite the tensor
level holds (integer and f32), from nvcc and
clang, compiled for a small stand-in base (2 base layers, one linear and one
full attention, a 512-row text vocabulary) and run in one stock
`Qwen3_5ForCausalLM`.

The launch is recorded on the ideal `tensor` engine, then the whole stream
goes through the merged model in float32, prefilled in windows with the
model's cache carried across (`replay_check`), and an f32 kernel's through
the same model cast to bfloat16 as well: at every token the machine named,
the model's argmax over the whole vocabulary is that token, so the model's
buffers are the trace's, and those must be the expected ones bit for bit.
A few kernels are also
decoded token by token with the model's cache in bfloat16
(`model_stepper`): the stream is the ideal engine's, token for token.

The base has the 2B layer shape (hidden 2048, intermediate 6144), or the
0.8B's (hidden 1024, intermediate 3584, the same 16 linear heads) for the
kernels of `NARROW`; the test id says which (`-h1024`, `-h2048`).

CI runs three nvcc kernels (about a minute on 2 cores); `make test-full`
runs every one, from both compilers (`-m full`; about N minutes, divrem_i
and mulhi_wide_u, over 120 layers each, the longest)."""

from __future__ import annotations

import gc
import json
import math
import os
import pickle
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_simt import WARP4_OWN_ANSWER, accepted_cases

from conftest import EXAMPLES, SHARED_KERNELS, shared_params, small_base_config
from qgc.runtime.launch import load_launch
from qgc.runtime.trace import run_trace, tensor_stepper

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("two_torch_threads")

#: (kernel, compiler) compiled for hidden 1024: those whose schedule fits it
#: in about as many layers as hidden 2048 takes. Most kernels do not fit
#: (their step program needs 1,036 to 1,799 residual coordinates, and the
#: scheduler says so); some fit but take 2 to 9 times the layers, more
#: weights than the 2B shape's (bit_tricks 78, branchy 103, compact_atomic_i
#: 123, stencil1d_halo_i 159 and vote_ops_i 54 from nvcc, inclusive_scan 238,
#: reverse_dynshared 133 and warp_reduce_shfl 88 from clang, against 22 to 30
#: at hidden 2048):
#: they and the rest are compiled for hidden 2048.
NARROW = {(name, compiler) for name in ("dot", "saxpy_s32", "vector_add", "vote_ballot")
          for compiler in ("nvcc", "clang")} | {
    ("inclusive_scan", "nvcc"), ("reverse_dynshared", "nvcc"), ("warp_reduce_shfl", "nvcc")}
#: (kernel, compiler) CI runs: dynamic shared memory and barriers, warp
#: shuffles (test_model_engine decodes dot at hidden 2048 in CI)
IN_CI = {("reverse_dynshared", "nvcc")}
#: (kernel, compiler) also decoded token by token in bfloat16 (about a second
#: a token on 2 cores: `make test-full` only)
DECODED = {("vote_ballot", "nvcc"), ("bit_tricks", "nvcc")}
COMPILERS = (("nvcc", ".ptx"), ("clang", ".clang.ptx"))
#: Compiled layers whose float32 weights would take more than this (36
#: layers of the 2B shape; `QGC_TEST_IN_MEMORY_GB` sets it, lower to run two
#: kernels side by side) are built in file-backed memory, which the kernel
#: pages in and out as the forward pass goes through them: a test stays
#: within about 10 GB, and divrem_i and mulhi_wide_u (over 120 layers, about
#: 30 GB) run at all. Their bfloat16 cast is file-backed too.
IN_MEMORY_BYTES = int(float(os.environ.get("QGC_TEST_IN_MEMORY_GB", "8")) * (1 << 30))
#: the dtypes an f32 kernel's stream is replayed in (`QGC_TEST_REPLAY_DTYPES`,
#: comma-separated: one of them to finish what an earlier run left; the
#: bfloat16 model is the float32 one cast either way); other kernels: float32
REPLAY_DTYPES = os.environ.get("QGC_TEST_REPLAY_DTYPES", "float32,bfloat16").split(",")
#: a file-backed model is replayed 8 layers at a time over the whole stream
#: (read once, not once a window: hours less for fastmath_f); under
#: `QGC_TEST_REPLAY_CHECKPOINTS` (a directory) each kernel's trace and replay
#: progress are kept there, and a run stopped part way resumes (fastmath_f's
#: float32 replay takes about three hours of one core)
LAYERS_PER_PASS = 8
CHECKPOINTS = os.environ.get("QGC_TEST_REPLAY_CHECKPOINTS")


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """hidden → the stand-in's text config."""
    from qgc.runtime.model import load_text_config
    return {h: load_text_config(small_base_config(tmp_path_factory.mktemp(f"base{h}"), h))
            for h in (1024, 2048)}


# ------------------------------------------------------------------ the kernels
class Case:
    """One kernel from one compiler: its PTX, launch and expected buffers."""

    def __init__(self, name: str, compiler: str, path: Path, launch, info: dict | None):
        self.name, self.compiler, self.path, self.launch = name, compiler, path, launch
        self.info = info             # the suite's JSON (None: an example)

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.compiler

    @property
    def is_float(self) -> bool:
        return self.name.endswith(("_f", "_f32")) or self.name in (
            "float_ops", "half_mix", "conv_const", "double_literals")

    @property
    def hidden(self) -> int:
        return 1024 if self.key in NARROW else 2048

    def check(self, buffers) -> None:
        """The buffers are the expected ones, bit for bit (a suite kernel's
        `checks` say where the order of atomics may vary)."""
        if self.info is None:
            if self.key in WARP4_OWN_ANSWER:
                assert buffers == ref_buffers(self.path, self.launch)
                return
            expected = json.loads((EXAMPLES / self.name / "expected.json").read_text())
            assert buffers == expected["buffers"]
            return
        info = self.info
        if self.compiler == "clang" and (info.get("warp4_undefined") or "expected_warp4" in info):
            # clang's PTX hard-codes 32-lane warps: the suite has no 4-lane answer
            assert buffers == ref_buffers(self.path, self.launch)
            return
        from test_ref_engine import check_buffer
        expected = info.get("expected_warp4", info["expected"])
        for param, got in zip(info["params"], buffers, strict=True):
            if param["kind"] == "ptr":
                check_buffer(param["name"], param["elem"], got, expected[param["name"]],
                             info.get("checks", {}).get(param["name"], {}))
            else:
                assert got is None


def ref_buffers(path: Path, launch):
    """The PTX's own answer on 4-lane warps (the `ref` engine: CUDA semantics)."""
    from qgc.frontend import parse_ptx
    from qgc.runtime.ref import run_ref
    return run_ref(parse_ptx(path.read_text(), path.name), launch, warp_size=4).buffers


def cases() -> list[Case]:
    out = []
    for name, compiler, suffix in sorted(accepted_cases()):
        launch = load_launch(EXAMPLES / name / "launch.json")
        out.append(Case(name, compiler, EXAMPLES / name / f"{name}{suffix}", launch, None))
    for spec in sorted(SHARED_KERNELS.glob("*.json")):
        info = json.loads(spec.read_text())
        launch = load_launch(info, spec.name)
        for compiler, suffix in COMPILERS:
            out.append(Case(spec.stem, compiler, SHARED_KERNELS / f"{spec.stem}{suffix}",
                            launch, info))
    return out


def _params():
    for case in cases():
        marks = [] if case.key in IN_CI else [pytest.mark.full]
        yield pytest.param(case, id=f"{case.name}-{case.compiler}-h{case.hidden}", marks=marks)
    yield from shared_params([])    # without the suite: its skip, said and counted


# ------------------------------------------------------------------ the runs
def layer_bytes(machine) -> int:
    """The float32 weights of the compiled layers and the readout."""
    from qgc.passes.tensor_to_weights import param_shapes
    per_layer = sum(math.prod(shape) for shape in param_shapes(machine.compiled.config).values())
    return 4 * per_layer * (len(machine.compiled.layers) + 1)


class FileBacked(Sequence):
    """Layer state dicts whose tensors live in (unlinked) files under
    `directory`, mapped shared: pages the kernel writes back, drops and
    reads again as memory runs short, so a model larger than the memory
    still runs (a replay reads each layer once)."""

    def __init__(self, states: Sequence[dict], directory: Path):
        self.states, self.directory = states, directory

    def __len__(self) -> int:
        return len(self.states)

    def __getitem__(self, index):  # type: ignore[override]
        return {name: file_copy(t, self.directory / f"layer{index}.{name}", t.dtype)
                for name, t in self.states[index].items()}


def file_copy(t, path: Path, dtype):
    """`t` as `dtype` in an (unlinked) file at `path`, mapped shared."""
    mapped = torch.from_file(str(path), shared=True, size=t.numel(), dtype=dtype)
    path.unlink()                  # the mapping keeps the file until it is freed
    return mapped.view(t.shape).copy_(t)


def back_with_files(machine, directory: Path) -> None:
    """`machine.layer_states` (what `merged_model` builds the layers from)
    gives file-backed tensors."""
    dense = machine.layer_states
    machine.layer_states = lambda dtype: FileBacked(dense(dtype), directory)


def cast_to_files(model, dtype, directory: Path):
    """`model.to(dtype)` with every cast parameter in an (unlinked) file
    under `directory`, mapped shared, as `FileBacked`'s."""
    for index, param in enumerate(model.parameters()):
        if param.dtype != dtype and param.is_floating_point():
            param.data = file_copy(param.data, directory / f"cast{index}", dtype)
    return model.to(dtype)          # the buffers


def kept_trace(directory: Path | None, trace):
    """`trace()`, or the result an earlier run kept in `directory`."""
    if directory is None:
        return trace()
    path = directory / "trace.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    result = trace()
    directory.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(result))
    return result


def run_case(case: Case, config, decode: bool, scratch: Path,
             timings: dict | None = None) -> None:
    """Compile `case` for `config`, record its launch on the ideal engine,
    replay it through the merged model in float32 (an f32 kernel in bfloat16
    too; with `decode`,
    decode it token by token in bfloat16); every stream's buffers are the
    expected ones. `timings` gets the measurements."""
    from qgc.merged_model import compile_machine, merged_model
    from qgc.runtime.model_engine import model_stepper, replay_check
    start = time.perf_counter()
    machine, kernel = compile_machine(str(case.path), config, case.launch)
    compiled = time.perf_counter()
    program, vocab = machine.compiled.program, machine.vocab
    weight_bytes = layer_bytes(machine)
    file_backed = weight_bytes > IN_MEMORY_BYTES
    if file_backed:
        back_with_files(machine, scratch)
    kept = Path(CHECKPOINTS) / f"{case.name}-{case.compiler}" if CHECKPOINTS else None
    ideal = kept_trace(kept, lambda: run_trace(kernel, vocab, case.launch,
                                               tensor_stepper(program, vocab)))
    case.check(ideal.buffers)
    traced = time.perf_counter()
    model, base_vocab = merged_model(machine, None, config, torch.float32)
    layers = model.config.num_hidden_layers - config.num_hidden_layers   # in front of the base
    del machine
    built = time.perf_counter()
    named = sum(ideal.predicted[1:])
    assert named > 0
    replays = {}

    def replay(model, dtype: str) -> dict:
        by_layers = dict(layers_per_pass=LAYERS_PER_PASS,
                         checkpoint=kept and kept / dtype) if file_backed else {}
        return replay_check(model, vocab, base_vocab, ideal.tokens, ideal.predicted,
                            **by_layers)

    if not case.is_float or "float32" in REPLAY_DTYPES:
        replays["float32"] = replay(model, "float32")
    if case.is_float and "bfloat16" in REPLAY_DTYPES:
        # f32 kernels: the same stream through the model in bfloat16 as well
        model = cast_to_files(model, torch.bfloat16, scratch) if file_backed else \
            model.to(torch.bfloat16)
        replays["bfloat16"] = replay(model, "bfloat16")
    assert replays and all(r["checked"] == named for r in replays.values())
    replayed = time.perf_counter()
    if decode:
        assert not file_backed, "decoding token by token takes a model in memory"
        model = model.to(torch.bfloat16)
        result = run_trace(kernel, vocab, case.launch, model_stepper(model, vocab, base_vocab))
        assert [t.spelled() for t in result.tokens] == [t.spelled() for t in ideal.tokens]
        case.check(result.buffers)
    decoded = time.perf_counter()
    del model
    gc.collect()
    if timings is not None:
        timings.update(layers=layers, tokens=len(ideal.tokens),
                       trace_tokens=ideal.stats["trace_tokens"], checked=named,
                       replayed="+".join(replays),
                       compile=compiled - start, trace=traced - compiled, build=built - traced,
                       replay=replayed - built, decode=decoded - replayed,
                       file_backed=file_backed)


@pytest.mark.parametrize("case", list(_params()))
def test_kernel_through_the_merged_model(configs, case, tmp_path):
    timings: dict = {}
    run_case(case, configs[case.hidden], case.key in DECODED, tmp_path, timings)
    print(f"\n{case.name}-{case.compiler}:",   # the measurements (with -s)
          ", ".join(f"{k} {v:.0f}" if isinstance(v, float) else f"{k} {v}"
                    for k, v in timings.items()))
