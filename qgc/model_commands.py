"""The commands that build and run the merged model: `qgc build`, `qgc run
--engine model` and `qgc drift`. torch and transformers are imported here,
lazily, by these paths only."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def _unscheduled() -> str:
    """The pipeline to the tensor level, unscheduled (all the host needs)."""
    from qgc.pipeline import stage_pipeline
    return stage_pipeline("tensor").partition(",tensor-schedule-layers")[0]


def say(message: str) -> None:
    print(f"qgc: {message}", file=sys.stderr)


# ------------------------------------------------------------------ machines
def compile_machine(path: str, config, launch=None, mem_words: int | None = None):
    """(CompiledMachine, simt kernel) of the PTX at `path`, scheduled for
    `config`; memory sized to `launch`, else `mem_words` words."""
    from qgc import driver
    from qgc.codegen import compiled_machine, schedule_options
    from qgc.pipeline import with_mem_words
    from qgc.runtime.model_engine import CompiledMachine
    ctx, module = driver.load(path)
    spec = _unscheduled() + "," + schedule_options(config)
    if launch is not None:
        driver.apply_for_launch(ctx, module, spec, launch)
    else:
        driver.apply(ctx, module, with_mem_words(spec, mem_words) if mem_words else spec)
    compiled, _, vocab, kernel = compiled_machine(module, config)
    return CompiledMachine(compiled, vocab), kernel


def host_kernel(path: str, mem_words: int, kernel_name: str | None = None):
    """The simt kernel, its unscheduled step program and vocabulary: what the
    host needs to run a launch on a machine built elsewhere."""
    from qgc import driver
    from qgc.dialects import tensor
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.pipeline import with_mem_words
    from qgc.runtime.simt_engine import pick_kernel
    ctx, module = driver.load(path)
    driver.apply(ctx, module, with_mem_words(_unscheduled(), mem_words))
    kernel = pick_kernel(module, kernel_name)
    (program,) = [p for p in tensor.programs_of(module)
                  if p.program_name == f"{kernel.kernel_name}_step"]
    return kernel, program, vocabulary_of(program)


def merged_model(machine, base_path: str | None, config, dtype):
    from qgc.runtime.model import load_base
    from qgc.runtime.model_engine import build_model
    base = load_base(base_path, config, dtype=dtype)
    base_vocab = base.config.vocab_size
    return build_model(machine, base, dtype), base_vocab


# ------------------------------------------------------------------ qgc build
def build(args: Any) -> int:
    """`qgc build K.ptx|layers.safetensors -o DIR`."""
    import torch

    from qgc.runtime.checkpoint import build_info, check_output, save_checkpoint
    from qgc.runtime.model import load_text_config
    check_output(args.output)
    dtype = getattr(torch, args.dtype)
    config = load_text_config(args.base or args.base_config)
    if args.input.endswith(".safetensors"):
        model, info, vocab = _from_layers_file(args, config, dtype)
    else:
        launch = _launch(args.launch) if args.launch else None
        machine, kernel = compile_machine(args.input, config, launch, args.mem_words)
        model, base_vocab = merged_model(machine, args.base, config, dtype)
        vocab = machine.vocab
        info = build_info(kernel, vocab, base_vocab,
                          model.config.num_hidden_layers - config.num_hidden_layers)
    save_checkpoint(model, vocab, info, args.output, tokenizer_from=args.base)
    say(f"wrote {args.output}: {info['compiled_layers']} compiled layers in front of "
        f"{config.num_hidden_layers}, {vocab.size} GPU tokens after {info['base_vocab']} "
        f"text rows, {args.dtype}")
    return 0


def _from_layers_file(args: Any, config, dtype):
    import torch

    from qgc.runtime.layers_file import (
        GPU_ROWS,
        check_base,
        layer_states,
        read_layers,
        vocabulary_from,
    )
    from qgc.runtime.model import load_base, merge
    arrays, meta = read_layers(args.input)
    check_base(args.input, meta, config)
    machine = json.loads(meta["machine"])
    vocab = vocabulary_from(json.loads(meta["gpu_vocabulary"]))
    states = [{k: torch.from_numpy(v) for k, v in s.items()}
              for s in layer_states(arrays, int(meta["layers"]))]
    base = load_base(args.base, config, dtype=dtype)
    info = {"qgc_version": meta["qgc_version"], "protocol_version": int(meta["protocol_version"]),
            "kernel": meta["kernel"], "fingerprint": machine.get("fingerprint", ""),
            "mem_words": machine["mem_words"], "base_vocab": base.config.vocab_size,
            "compiled_layers": len(states), "gpu_vocabulary": json.loads(meta["gpu_vocabulary"])}
    model = merge(base, states, torch.from_numpy(arrays[GPU_ROWS])).to(dtype)
    return model, info, vocab


def _launch(path: str):
    from qgc.runtime.launch import load_launch
    return load_launch(Path(path))


# ------------------------------------------------------------------ qgc run --engine model
def run_model(args: Any, launch):
    """The launch through the merged model: decoded token by token (default),
    by stock `generate` one step per call, or recorded on the ideal engine and
    replayed in one prefill pass that checks every named token."""
    import torch

    from qgc.runtime.model import load_text_config
    from qgc.runtime.trace import run_trace, tensor_stepper
    dtype = getattr(torch, args.dtype)
    if args.model:
        model, kernel, program, vocab, base_vocab, compiled_layers = _built(args, launch, dtype)
    else:
        config = load_text_config(args.base or args.base_config)
        machine, kernel = compile_machine(args.input, config, launch)
        model, base_vocab = merged_model(machine, args.base, config, dtype)
        program, vocab = machine.compiled.program, machine.vocab
        compiled_layers = model.config.num_hidden_layers - config.num_hidden_layers
    recorder = _recorder(args, model, compiled_layers)
    start = time.perf_counter()
    with recorder:
        if args.replay:
            from qgc.runtime.model_engine import replay_check
            result = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
            replay_check(model, vocab, base_vocab, result.tokens, result.predicted)
        else:
            result = run_trace(kernel, vocab, launch, _stepper(args, model, vocab, base_vocab))
    seconds = time.perf_counter() - start
    st = result.stats
    mode = "replay" if args.replay else "generate" if args.generate else "decode"
    say(f"model engine ({mode}, {args.dtype}): {st['tokens']} tokens ({st['prompt_tokens']} "
        f"prompt, {st['trace_tokens']} trace), {st['exec_steps']} steps, {compiled_layers} "
        f"compiled layers in front of {model.config.num_hidden_layers - compiled_layers}; "
        f"{st['tokens'] / seconds:.1f} tokens/s")
    if args.trace_png:
        _draw(args, recorder, result)
    return result


def _built(args: Any, launch, dtype):
    from qgc.runtime.checkpoint import check_kernel, load_checkpoint, read_info
    from qgc.runtime.launch import LaunchError
    from qgc.runtime.simt_engine import memory_layout
    info = read_info(args.model)
    kernel, program, vocab = host_kernel(args.input, info["mem_words"], launch.kernel)
    check_kernel(args.model, info, kernel, vocab)
    try:                                  # before loading: the launch must fit the machine
        memory_layout(kernel, launch)
    except LaunchError as err:
        raise LaunchError(f"{err}; '{args.model}' was built with {info['mem_words']} words "
                          "(qgc build --mem-words N, or --launch L.json)") from None
    model, info, _ = load_checkpoint(args.model, dtype)
    return model, kernel, program, vocab, info["base_vocab"], info["compiled_layers"]


def _stepper(args: Any, model, vocab, base_vocab: int):
    from qgc.runtime.model_engine import GenerateMachine, model_stepper
    if args.generate:
        return GenerateMachine(model, vocab, base_vocab)
    return model_stepper(model, vocab, base_vocab)


class _NoRecorder:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _recorder(args: Any, model, compiled_layers: int):
    if not args.trace_png:
        return _NoRecorder()
    from qgc.runtime.trace_png import ActivityRecorder
    return ActivityRecorder(model, compiled_layers)


def _draw(args: Any, recorder, result) -> None:
    from qgc.runtime.trace_png import draw_trace
    summary = draw_trace(recorder.activity, result.tokens, args.trace_png,
                         title=f"{Path(args.input).name}: {len(result.tokens)} tokens")
    say(f"wrote {args.trace_png} ({summary['rows']} rows)")


# ------------------------------------------------------------------ qgc drift
def drift(args: Any) -> int:
    """KL and top-1 agreement of next-token distributions, base against
    merged, on text; and the largest relative change of the residual stream
    on text tokens at the exit of the compiled layers."""
    import torch

    from qgc.runtime.model import load_text_config
    config = load_text_config(args.base or args.base_config)
    machine, kernel = compile_machine(args.input, config, None, args.mem_words)
    ids = text_inputs(args.base, config, args.sequences, args.length)
    say(f"drift of {kernel.kernel_name} on {ids.shape[0]} text sequences of {ids.shape[1]} "
        "tokens" + ("" if args.base else " (stand-in base: random weights, token ids)"))
    for name in args.dtypes.split(","):
        f = drift_figures(machine, args.base, config, ids, getattr(torch, name), not args.no_mute)
        say(f"{name}: {f['layers']} compiled layers; " + (
            f"text mute: marker coordinate {f['marker']}, {f['squares']} squares, mark up to "
            f"{f['mark']:.3g}·|h|, fitted removal leaves up to {f['fit_max']:.2e}·|h| "
            f"(rms {f['fit_rms']:.2e}) over every embedding row" if "marker" in f
            else "no text mute"))
        print(f"KL {name} {f['kl']:.3e}")
        print(f"KL-text {name} {f['kl_text']:.3e}")
        print(f"gpu-mass {name} {f['gpu_mass']:.3e}")
        print(f"top1 {name} {f['top1']:.4f}")
        print(f"residual {name} {f['residual']:.3e}")
    return 0


def text_inputs(base_path: str | None, config, sequences: int, length: int):
    """Token ids of text: the built-in sentences through the base's tokenizer,
    else seeded ids of rows a tokenizer maps to (the 2B's last 243 rows are
    unused)."""
    import torch
    if base_path is not None:
        from qgc.runtime.checkpoint import _has_tokenizer
        if _has_tokenizer(Path(base_path)):
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
    import torch

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
