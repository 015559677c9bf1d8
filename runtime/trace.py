"""The host side of the token protocol (qgc.protocol): the launch prompt, the
scheduling loop, and reading the buffers back from the trace.

The host appends tokens, picks the next warp (round-robin over the warps that
have not exited, as the `simt` engine does) and formats numbers; it never
computes on kernel data. A *stepper* is the machine that answers each token
with the next one: the ideal `tensor` engine or the merged model.

    result = run_trace(kernel, vocab, launch, stepper)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from qgc import protocol as P
from qgc.dialects import simt
from qgc.passes.convert_simt_to_tensor import (
    LAUNCH_CONSTANTS,
    WARP_FIELDS,
    launch_slot_of_warp,
)
from qgc.runtime.launch import Launch, LaunchError
from qgc.runtime.memory import Trap
from qgc.runtime.simt_engine import decode_element, make_warps, memory_layout

DEFAULT_MAX_STEPS = 100_000

#: A stepper takes the next token of the stream and returns the token the
#: machine names after it (its greedy continuation), or None where that is no
#: token of the vocabulary (the host ignores it after the prompt and after END).
#: A stepper may also have `prefill(tokens)`: the launch prompt in one go.
Stepper = Callable[[P.Token], P.Token | None]


@dataclass
class TraceResult:
    buffers: list[list | None]
    tokens: list[P.Token] = field(default_factory=list)   # prompt and trace, in order
    stats: dict[str, object] = field(default_factory=dict)


def specials_read(kernel: simt.KernelOp) -> set[str]:
    return {op.which.data for op in kernel.walk() if isinstance(op, simt.SpecialOp)}


def initial_memory(kernel: simt.KernelOp, launch: Launch) -> tuple[dict[int, int], list]:
    """The record address → word of everything the kernel may read: its
    parameter words, its buffers, and the launch area (geometry of each warp,
    lanes without a thread)."""
    layout = memory_layout(kernel, launch)
    words: dict[int, int] = {i: layout.words[i] for i in range(len(kernel.params))}
    for i, base in layout.bases.items():
        for k in range(layout.sizes[i]):
            words[base + k] = layout.words[base + k]
    if launch.block[1] != 1 or launch.block[2] != 1:
        raise LaunchError("the machine's tensor level runs 1-D thread blocks (block [x, 1, 1]) "
                          "for now")
    warps = [w for w in make_warps(launch, 0, 0) if w.active]
    if len(warps) > 8:
        raise LaunchError(f"the launch has {len(warps)} warps; the compiled machine runs at "
                          "most 8 (option max-warps)")
    used = specials_read(kernel)
    area = P.LAUNCH_AREA
    for name, slot in LAUNCH_CONSTANTS.items():
        if name in used:
            axis = "xyz".index(name[-1])
            dims = launch.block if name.startswith("ntid") else launch.grid
            words[area + slot] = dims[axis]
    for w_index, w in enumerate(warps):
        first = next(t for t in w.tids if t is not None)
        fields = {"ctaid.x": w.ctaid[0], "ctaid.y": w.ctaid[1], "ctaid.z": w.ctaid[2],
                  "tid.x": first[0] - w.tids.index(first),
                  "inactive": sum(1 << ln for ln, t in enumerate(w.tids) if t is None)}
        for name, v in fields.items():
            if name in used or name == "inactive":
                words[area + launch_slot_of_warp(w_index, name)] = v
    assert set(WARP_FIELDS) == set(fields)
    return words, warps


def prompt(words: dict[int, int]) -> list[P.Token]:
    """Records of every non-zero word (memory starts at zero)."""
    out: list[P.Token] = []
    for address in sorted(words):
        if words[address]:
            out += P.record_tokens(0, address, words[address])
    return out


class Records:
    """Reads records back from the stream: `A` opens one, the top `D` closes it."""

    def __init__(self, memory: dict[int, int]):
        self.memory = memory
        self.address: int | None = None
        self.bytes: dict[int, int] = {}

    def feed(self, t: P.Token) -> None:
        if t.kind == "A":
            self.address, self.bytes = t.a, {}
        elif t.kind == "D":
            if self.address is None:
                raise Trap(f"trap: the trace has a data byte {t.spelled()} outside a record")
            self.bytes[t.j] = t.v
            if t.top:
                self.memory[self.address] = sum(v << (8 * j) for j, v in self.bytes.items())
                self.address = None


def run_trace(kernel: simt.KernelOp, vocab: P.Vocabulary, launch: Launch, stepper: Stepper,
              max_steps: int = DEFAULT_MAX_STEPS) -> TraceResult:
    words, warps = initial_memory(kernel, launch)
    if len(warps) > vocab.warps:
        raise LaunchError(f"the launch has {len(warps)} warps; the compiled machine runs at "
                          f"most {vocab.warps} (option max-warps)")
    stream: list[P.Token] = []
    memory = dict(words)
    records = Records(memory)

    def append(t: P.Token) -> P.Token | None:
        stream.append(t)
        records.feed(t)
        return stepper(t)

    def expect(t: P.Token | None) -> P.Token:
        if t is None:
            raise Trap(f"trap: at token {len(stream)} the machine names no GPU token "
                       f"(after {stream[-1].spelled()})")
        return t

    launch_prompt = prompt(words)
    prefill = getattr(stepper, "prefill", None)
    if prefill is None:
        for t in launch_prompt:
            append(t)
    else:                        # the stepper takes the whole prompt in one go
        stream.extend(launch_prompt)
        for t in launch_prompt:
            records.feed(t)
        if launch_prompt:
            prefill(launch_prompt)
    block = {w: 0 for w in range(len(warps))}
    live = list(range(len(warps)))
    steps = 0
    exited = vocab.blocks
    while live:
        for w in live:
            nxt = expect(append(P.Token("EXEC", w=w, b=block[w])))
            steps += 1
            while nxt.kind != "END":
                if nxt.kind == "EXEC" or len(stream) > 64 * max_steps:
                    raise Trap(f"trap: at token {len(stream)} the step does not end "
                               f"({nxt.spelled()})")
                nxt = expect(append(nxt))
            append(nxt)
            block[w] = nxt.b
        if steps > max_steps:
            raise Trap(f"trap: the launch ran past the limit of {max_steps} EXEC steps "
                       "(an endless loop?)")
        live = [w for w in live if block[w] != exited]
    layout = memory_layout(kernel, launch)
    buffers: list[list | None] = []
    for i, arg in enumerate(launch.args):
        if i not in layout.bases:
            buffers.append(None)
            continue
        base = layout.bases[i]
        buffers.append([decode_element(arg.type, [memory.get(base + k, 0)])
                        for k in range(layout.sizes[i])])
    n_prompt = len(launch_prompt)
    stats = {"tokens": len(stream), "prompt_tokens": n_prompt, "exec_steps": steps,
             "trace_tokens": len(stream) - n_prompt, "gpu_vocabulary": vocab.size}
    return TraceResult(buffers, stream, stats)


def tensor_stepper(program, vocab: P.Vocabulary, record: list | None = None) -> Stepper:
    """The ideal `tensor` engine as a stepper: one `run_tensor` per token, the
    memories kept from token to token; `record` collects (token, outputs)."""
    from qgc.runtime.tensor_engine import run_tensor
    state: dict = {}

    def step(t: P.Token) -> P.Token | None:
        nonlocal state
        out, state = run_tensor(program, vocab.inputs(t), state)
        if record is not None:
            record.append((t, out))
        try:
            return vocab.from_outputs(out)
        except ValueError:
            return None
    return step
