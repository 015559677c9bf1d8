"""`qgc build KERNEL.ptx|layers.safetensors -o DIR`: the merged model (the
compiled layers in front of the base) as a stock transformers checkpoint."""

from __future__ import annotations

import argparse
from pathlib import Path

from qgc.cli.common import add_base_flags, say
from qgc.protocol import BANK_WORDS
from qgc.runtime.launch import load_launch


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "build", prog="qgc build", help="write the merged model as a stock checkpoint",
        description="Write the merged model (compiled layers in front of "
        "the base) as a stock transformers checkpoint directory.")
    p.add_argument("input", help="PTX file, or a layers file from `qgc K.ptx -o F.safetensors`")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    add_base_flags(p)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--mem-words", type=int, metavar="N",
                      help=f"words of machine memory (default {BANK_WORDS})")
    size.add_argument("--launch", metavar="L.json", help="size the memory to this launch")
    p.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    import torch  # torch and the model: this command only

    from qgc.merged_model import compile_machine, layers_file_model, merged_model
    from qgc.runtime.checkpoint import build_info, check_output, save_checkpoint
    from qgc.runtime.model import load_text_config
    check_output(args.output)
    dtype = getattr(torch, args.dtype)
    config = load_text_config(args.base or args.base_config)
    if args.input.endswith(".safetensors"):
        model, info, vocab = layers_file_model(args.input, args.base, config, dtype)
    else:
        launch = load_launch(Path(args.launch)) if args.launch else None
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
