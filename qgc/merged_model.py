"""The merged model as a library: a kernel compiled for a base config and
merged in front of the base (or read back from a layers file or a built
checkpoint), what the host needs to run a launch on it, and its drift on
text. `qgc build`, `qgc run --engine model`, `qgc drift`, bench/ and the tests
use it; it imports torch, so the CLI imports it only on those paths."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from qgc import driver
from qgc.codegen import compiled_machine
from qgc.machine.abi import memory_layout, pick_kernel
from qgc.passes.convert_simt_to_tensor import vocabulary_of
from qgc.pipeline import stage, step_program, up_to
from qgc.protocol import Vocabulary
from qgc.runtime.checkpoint import check_kernel, has_tokenizer, load_checkpoint, read_info
from qgc.runtime.launch import LaunchError
from qgc.runtime.layers_file import GPU_ROWS, check_base, layer_states, read_layers
from qgc.runtime.model import load_base, merge
from qgc.runtime.model_engine import CompiledMachine, build_model


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
    base = load_base(base_path, config, dtype=dtype)
    base_vocab = base.config.vocab_size
    return build_model(machine, base, dtype), base_vocab


def layers_file_model(path: str, base_path: str | None, config, dtype):
    """(merged model, checkpoint info, vocabulary) of a layers file from
    `qgc K.ptx -o F.safetensors`, merged in front of the base."""
    arrays, meta = read_layers(path)
    check_base(path, meta, config)
    machine = json.loads(meta["machine"])
    vocab = Vocabulary.from_json(json.loads(meta["gpu_vocabulary"]))
    states = [{k: torch.from_numpy(v) for k, v in s.items()}
              for s in layer_states(arrays, int(meta["layers"]))]
    base = load_base(base_path, config, dtype=dtype)
    info = {"qgc_version": meta["qgc_version"], "protocol_version": int(meta["protocol_version"]),
            "kernel": meta["kernel"], "fingerprint": machine.get("fingerprint", ""),
            "mem_words": machine["mem_words"], "base_vocab": base.config.vocab_size,
            "compiled_layers": len(states), "gpu_vocabulary": json.loads(meta["gpu_vocabulary"])}
    model = merge(base, states, torch.from_numpy(arrays[GPU_ROWS])).to(dtype)
    return model, info, vocab


def built_model(model_dir: str, path: str, launch, dtype):
    """(model, kernel, program, vocabulary, base vocabulary size, compiled
    layers) of a checkpoint `qgc build` wrote, for the kernel at `path`."""
    info = read_info(model_dir)
    kernel, program, vocab = host_kernel(path, info["mem_words"], launch.kernel)
    check_kernel(model_dir, info, kernel, vocab)
    try:                                  # before loading: the launch must fit the machine
        memory_layout(kernel, launch)
    except LaunchError as err:
        raise LaunchError(f"{err}; '{model_dir}' was built with {info['mem_words']} words "
                          "(qgc build --mem-words N, or --launch L.json)") from None
    model, info, _ = load_checkpoint(model_dir, dtype)
    return model, kernel, program, vocab, info["base_vocab"], info["compiled_layers"]


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
