"""`qgc build KERNEL.ptx|layers.safetensors -o DIR`: the merged model (the
compiled layers in front of the base) as a stock transformers checkpoint.
Both inputs go through the same compiled layers (`CompiledLayers`) and the
same merge: one model, whichever the input."""

from __future__ import annotations

import argparse
from pathlib import Path

from qgc.cli.common import add_base_flags, say
from qgc.protocol import BANK_WORDS
from qgc.runtime.launch import blame, load_launch


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "build", prog="qgc build", help="write the merged model as a stock checkpoint",
        description="Write the merged model (compiled layers in front of "
        "the base) as a stock transformers checkpoint directory.")
    p.add_argument("input", help="PTX file (.ptx or .mlir), a layers file from "
                   "`qgc K.ptx -o F.safetensors`, or - (PTX or IR on the standard input)")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    add_base_flags(p)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--mem-words", type=int, metavar="N",
                      help=f"words of machine memory (default {BANK_WORDS}; PTX input only)")
    size.add_argument("--launch", metavar="L.json",
                      help="size the memory to this launch (PTX input only)")
    p.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    import torch  # torch and the model: this command only

    from qgc.diagnostics import QgcError
    from qgc.merged_model import build, compile_layers
    from qgc.runtime.checkpoint import check_output, describe_layers, save_checkpoint
    from qgc.runtime.layers_file import read_layers
    from qgc.runtime.model import load_text_config
    check_output(args.output)
    config = load_text_config(args.base or args.base_config)
    if args.input.endswith(".safetensors"):
        if args.launch or args.mem_words:
            raise QgcError("error: --launch and --mem-words size a PTX kernel's memory; a "
                           f"layers file's is fixed ('{args.input}')", 2)
        layers = read_layers(args.input)
    else:
        launch = load_launch(Path(args.launch)) if args.launch else None
        with blame(launch):
            layers = compile_layers(args.input, config, launch, args.mem_words)
    model, info = build(layers, args.input, args.base, args.base_config, config,
                        getattr(torch, args.dtype))
    save_checkpoint(model, layers.vocabulary, info, args.output, tokenizer_from=args.base)
    counts = info["layers"]
    say(f"wrote {args.output}: {describe_layers(counts['step'], bool(counts['text_mute']))} "
        f"in front of {config.num_hidden_layers}, {layers.vocabulary.size} GPU tokens after "
        f"{info['base_vocab']} text rows, {args.dtype}")
    return 0
