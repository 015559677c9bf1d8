"""The merged model as a library: a kernel compiled for a base config and
merged in front of the base (or read back from a layers file or a built
checkpoint), what the host needs to run a launch on it, and its drift on
text. `qgc build`, `qgc run --engine model`, `qgc drift`, bench/ and the tests
use it; it imports torch, so the CLI imports it only on those paths."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from qgc import driver
from qgc import protocol as P
from qgc.codegen import compiled_machine
from qgc.dialects import weights as W
from qgc.machine.abi import memory_layout, pick_kernel
from qgc.passes.convert_simt_to_tensor import vocabulary_of
from qgc.pipeline import stage, step_program, up_to
from qgc.runtime.checkpoint import (
    build_info,
    check_kernel,
    has_tokenizer,
    load_checkpoint,
    read_info,
)
from qgc.runtime.launch import Launch, LaunchError, load_launch
from qgc.runtime.layers_file import CompiledLayers, check_base, layers_of


def unscheduled(mem_words: int | None = None):
    """The pipeline to the tensor level, unscheduled (all the host needs)."""
    return up_to(stage("tensor", mem_words=mem_words), "tensor-schedule-layers")


# ------------------------------------------------------------------ machines
def compile_machine(path: str, config, launch=None, mem_words: int | None = None):
    """(CompiledMachine, simt kernel) of the PTX at `path`, scheduled for
    `config`; memory sized to `launch`, else `mem_words` words."""
    ctx, module = driver.load(path)
    if launch is not None:
        driver.apply_for_launch(ctx, module, stage("tensor", schedule=config), launch)
    else:
        driver.apply(ctx, module, stage("tensor", mem_words=mem_words or None, schedule=config))
    from qgc.runtime.model_engine import CompiledMachine
    compiled, _, vocab, kernel = compiled_machine(module, config)
    return CompiledMachine(compiled, vocab), kernel


def host_kernel(path: str, mem_words: int, kernel_name: str | None = None):
    """The simt kernel, its unscheduled step program and vocabulary: what the
    host needs to run a launch on a machine built elsewhere."""
    ctx, module = driver.load(path)
    driver.apply(ctx, module, unscheduled(mem_words))
    kernel = pick_kernel(module, kernel_name)
    program = step_program(module, kernel)
    return kernel, program, vocabulary_of(program)


def merged_model(machine, base_path: str | None, config, dtype):
    from qgc.runtime.model import load_base
    from qgc.runtime.model_engine import build_model
    base = load_base(base_path, config, dtype=dtype)
    base_vocab = base.config.vocab_size
    return build_model(machine, base, dtype), base_vocab


# ------------------------------------------------------------------ qgc build
def compile_layers(path: str, config, launch=None, mem_words: int | None = None
                   ) -> CompiledLayers:
    """The PTX at `path` compiled for `config` to the weights level, as the
    layers file `qgc K.ptx -o F.safetensors` would hold it; memory sized to
    `launch`, else `mem_words` words."""
    ctx, module = driver.load(path)
    if launch is not None:
        driver.apply_for_launch(ctx, module, stage("weights", schedule=config), launch)
    else:
        driver.apply(ctx, module, stage("weights", mem_words=mem_words or None, schedule=config))
    (model,) = W.models_of(module)
    return layers_of(model, config)


def compile_with_host(path: str, config, launch):
    """(CompiledLayers, simt kernel, step program, vocabulary) of the PTX at
    `path` compiled once for `config` and `launch`: the layers file's contents
    and what the host runs them with, from the same compile (a kernel the
    driver fitted into fewer layers is the one the layers hold)."""
    from qgc.pipeline import from_pass
    ctx, module = driver.load(path)
    passes = stage("weights", schedule=config)
    driver.apply_for_launch(ctx, module, up_to(passes, "convert-tensor-to-weights"), launch)
    kernel = pick_kernel(module, launch.kernel)
    program = step_program(module, kernel)
    host = kernel.clone(), program.clone()
    driver.apply(ctx, module, from_pass(passes, "convert-tensor-to-weights"))
    (model,) = W.models_of(module)
    return layers_of(model, config), host[0], host[1], vocabulary_of(host[1])


def build(layers: CompiledLayers, source: str, base_path: str | None, base_config, config,
          dtype):
    """(merged model, qgc.json info) of compiled layers, however they were
    made (`compile_layers` or `read_layers`): one merge, one model."""
    from qgc.runtime.model import load_base
    from qgc.runtime.model_engine import layers_model
    check_base(source, layers, config)
    base = load_base(base_path, config, dtype=dtype)
    base_vocab = base.config.vocab_size
    model = layers_model(layers, base, dtype)
    info = build_info(layers, base_vocab, model.qgc_text_mute is not None,
                      base=describe_base(base_path, base_config),
                      dtype=str(dtype).removeprefix("torch."), source=Path(source).name)
    return model, info


def describe_base(base_path: str | None, base_config: str | None) -> str:
    """The base as the model card names it."""
    if base_path is not None:
        return f"checkpoint '{Path(base_path).name}'"
    config = base_config or "2b"
    return f"stand-in: the {config} text config with seeded random weights (seed 0)"


def built_model(model_dir: str, path: str, launch, dtype=None):
    """(model, kernel, program, vocabulary, base vocabulary size, compiled
    layers by kind: `layer_counts`) of a checkpoint `qgc build` wrote, for
    the kernel at `path`. It runs in its own dtype unless `dtype` is given;
    which, is said on stderr."""
    info, kernel, program, vocab = _built_host(model_dir, path, launch)
    model, info, _ = load_checkpoint(model_dir, dtype, info)
    say_dtype(model_dir, model, info, dtype)
    return model, kernel, program, vocab, info["base_vocab"], info["layers"]


def built_layers(model_dir: str, path: str, launch):
    """(compiled layers: `checkpoint.BuiltLayers`, kernel, vocabulary) of a
    checkpoint `qgc build` wrote, for the kernel at `path`, without loading
    its model (the compact engine's input)."""
    from qgc.runtime.checkpoint import BuiltLayers
    info, kernel, _, vocab = _built_host(model_dir, path, launch)
    return BuiltLayers(model_dir, info), kernel, vocab


def _built_host(model_dir: str, path: str, launch):
    """(qgc.json, kernel, program, vocabulary) of the PTX at `path` for the
    build in `model_dir`: the kernel it was built from, `launch` fitting its memory."""
    info = read_info(model_dir)
    kernel, program, vocab = host_kernel(path, info["mem_words"], launch.kernel)
    check_kernel(model_dir, info, kernel, vocab)
    try:                                  # before loading: the launch must fit the machine
        memory_layout(kernel, launch)
    except LaunchError as err:
        raise LaunchError(f"{err}; '{model_dir}' was built with {info['mem_words']} words "
                          "(qgc build --mem-words N, or --launch L.json)") from None
    return info, kernel, program, vocab


def say_dtype(model_dir: str, model, info: dict, asked) -> None:
    running = str(model.dtype).removeprefix("torch.")
    own = info.get("dtype", running)
    why = ("its own dtype; --dtype to change" if asked is None else
           f"--dtype; it was built in {own}" if own != running else "--dtype")
    print(f"qgc: running '{model_dir}' in {running} ({why})", file=sys.stderr)


def prompt_ids(model_dir: str | Path, ptx_path: str | Path,
               launch: str | Path | dict | Launch) -> list[int]:
    """The token ids a `qgc build` model takes for `launch` of the kernel at
    `ptx_path`: the launch prompt (the machine memory and the first CTAs'
    launch areas, as records) and the first warp step's `EXEC`. Stock
    `generate` with the build's generation config then names that step's
    tokens, greedily, up to its `END`:

        ids = qgc.prompt_ids("dot-model", "dot.ptx", "launch.json")
        out = model.generate(torch.tensor([ids]), generation_config=config)

    (`qgc run K.ptx --launch L.json --engine model --model DIR` runs every
    step so, feeding the next `EXEC` after each `END`.)"""
    from qgc.machine.warps import Residency, make_warps
    from qgc.runtime.trace import initial_memory, launch_area, prompt, specials_read
    if not isinstance(launch, Launch):
        launch = load_launch(launch if isinstance(launch, dict) else Path(launch))
    info = read_info(model_dir)
    kernel, _, vocab = host_kernel(str(ptx_path), info["mem_words"], launch.kernel)
    check_kernel(model_dir, info, kernel, vocab)
    layout = memory_layout(kernel, launch)
    entered = Residency(make_warps(launch, 0, 0), vocab.warps).admit(lambda warp: False)
    tokens = prompt(initial_memory(layout) |
                    launch_area(specials_read(kernel), launch, layout, entered, vocab))
    tokens.append(P.Token("EXEC", w=entered[0][0], b=0))
    return [info["base_vocab"] + vocab.id_of(t) for t in tokens]


# ------------------------------------------------------------------ drift
def text_inputs(base_path: str | None, config, sequences: int, length: int):
    """Token ids of text: the built-in sentences through the base's tokenizer,
    else seeded ids of rows a tokenizer maps to (the 2B's last 243 rows are
    unused)."""
    if base_path is not None and has_tokenizer(Path(base_path)):
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(base_path, local_files_only=True)
        rows = [tok(s)["input_ids"][:length] for s in SENTENCES[:sequences]]
        width = min(len(r) for r in rows)
        return torch.tensor([r[:width] for r in rows])
    text_rows = config.vocab_size - (243 if config.vocab_size == 248_320 else 0)
    return torch.randint(0, text_rows, (sequences, length),
                         generator=torch.Generator().manual_seed(0))


SENTENCES = (
    "The quick brown fox jumps over the lazy dog while the farmer watches from the porch.",
    "In 1905 Albert Einstein published four papers that changed physics for good.",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "Der Kompilierer übersetzt den Kern in Gewichte, die das Sprachmodell ausführt.",
    "A kernel launch is a grid of blocks; each block is a group of threads.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "She sold seashells by the seashore, and the shells she sold were surely seashells.",
    "北京是中国的首都，也是一座历史悠久的城市。",
)


def drift_figures(machine, base_path: str | None, config, ids, dtype,
                  mute: bool = True) -> dict[str, float]:
    """Base against merged on `ids`: KL(base ‖ merged) of the next-token
    distributions (the merged one over its whole vocabulary, GPU tokens
    included), the same over text tokens only (renormalised), the mass the
    merged model gives GPU tokens, top-1 agreement over the whole
    vocabulary, and the largest relative change of the residual at the exit
    of the compiled layers."""
    from qgc.runtime.model import load_base
    from qgc.runtime.model_engine import build_model
    base = load_base(base_path, config, dtype=dtype)
    with torch.no_grad():
        reference = base(ids).logits.double().log_softmax(-1)
        embedded = base.model.embed_tokens(ids).double()
    text = reference.shape[-1]
    model = build_model(machine, base, dtype, mute=mute)
    compiled = model.config.num_hidden_layers - config.num_hidden_layers
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
    full = out.logits.double().log_softmax(-1)
    text_part = full[..., :text]
    p = reference.exp()
    kl = (p * (reference - text_part)).sum(-1)
    kl_text = (p * (reference - text_part.log_softmax(-1))).sum(-1)
    gpu_mass = 1 - text_part.exp().sum(-1)
    change = (out.hidden_states[compiled].double() - embedded).norm(dim=-1) / \
        embedded.norm(dim=-1)
    figures = {"kl": float(kl.mean()), "kl_text": float(kl_text.mean()),
               "gpu_mass": float(gpu_mass.mean()),
               "top1": float((reference.argmax(-1) == full.argmax(-1)).double().mean()),
               "residual": float(change.max()), "layers": compiled}
    plan = model.qgc_text_mute
    if plan is not None:
        figures.update(marker=plan.marker, squares=len(plan.squares), mark=plan.report["mark"],
                       fit_max=plan.report["max_change"], fit_rms=plan.report["rms_change"])
    return figures
