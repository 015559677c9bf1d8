"""`qgc drift KERNEL.ptx`: what the compiled layers do to text, base against
merged model."""

from __future__ import annotations

import argparse

from qgc.cli.common import add_base_flags, say


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "drift", prog="qgc drift", help="measure the merged model's drift on text",
        description="KL and top-1 agreement of next-token distributions, "
        "base against merged model, on text; the residual's change at the compiled layers' exit.")
    p.add_argument("input", help="PTX file (.ptx or .mlir), or - for the standard input")
    add_base_flags(p)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--sequences", type=int, default=4, help="text sequences")
    p.add_argument("--length", type=int, default=32, help="tokens per sequence")
    p.add_argument("--mem-words", type=int, metavar="N")
    p.add_argument("--no-mute", action="store_true",
                   help="merge without the text mute (to see what it removes)")
    p.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    """KL and top-1 agreement of next-token distributions, base against
    merged, on text; and the largest relative change of the residual stream
    on text tokens at the exit of the compiled layers."""
    import torch  # torch and the model: this command only

    from qgc.merged_model import compile_machine, drift_figures, text_inputs
    from qgc.runtime.checkpoint import describe_layers
    from qgc.runtime.model import load_text_config
    config = load_text_config(args.base or args.base_config)
    machine, kernel = compile_machine(args.input, config, None, args.mem_words)
    ids = text_inputs(args.base, config, args.sequences, args.length)
    say(f"drift of {kernel.kernel_name} on {ids.shape[0]} text sequences of {ids.shape[1]} "
        "tokens" + ("" if args.base else " (stand-in base: random weights, token ids)"))
    for name in args.dtypes.split(","):
        f = drift_figures(machine, args.base, config, ids, getattr(torch, name), not args.no_mute)
        mute = "marker" in f
        say(f"{name}: {describe_layers(f['layers'] - 1 - mute, mute)}; " + (
            f"text mute: marker coordinate {f['marker']}, {f['squares']} squares, mark up to "
            f"{f['mark']:.3g}·|h|, fitted removal leaves up to {f['fit_max']:.2e}·|h| "
            f"(rms {f['fit_rms']:.2e}) over every embedding row"
            if mute else "no text mute"))
        print(f"KL {name} {f['kl']:.3e}")
        print(f"KL-text {name} {f['kl_text']:.3e}")
        print(f"gpu-mass {name} {f['gpu_mass']:.3e}")
        print(f"top1 {name} {f['top1']:.4f}")
        print(f"residual {name} {f['residual']:.3e}")
    return 0
