"""The host side of the token protocol (qgc.protocol): the launch prompt, the
scheduling loop, and reading the buffers back from the trace.

The host appends tokens, picks the next warp (round-robin over the resident
warps that have not exited, as the `simt` engine does), lets the next CTA into
the warp slots of one that has exited (writing the slots' launch-area words
as records) and formats numbers; it never computes on kernel data. A *stepper* is the machine that answers each token
with the next one: the ideal `tensor` engine or the merged model.

    result = run_trace(kernel, vocab, launch, stepper)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from qgc import protocol as P
from qgc.dialects import simt
from qgc.runtime.launch import Launch, LaunchError
from qgc.runtime.memory import Trap
from qgc.runtime.simt_engine import (
    Residency,
    Warp,
    decode_element,
    make_warps,
    memory_layout,
    words_per_element,
)

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


def _bytes(values: list[int]) -> int:
    if any(not 0 <= v < 256 for v in values):
        raise LaunchError(f"the launch's geometry {values} does not fit the machine's "
                          "launch-area bytes (each value below 256)")
    return sum(v << (8 * i) for i, v in enumerate(values))


def warp_words(used: set[str], launch: Launch, layout, warp) -> dict[str, int]:
    """The launch-area words of one warp (`protocol.LaunchArea`): geometry as
    bytes per axis or per lane (only the special registers in `used`), lanes
    without a thread as exited, the CTA's shared window and the warp's spill
    slots."""

    def axes(name: str, dims) -> int:
        return _bytes([d if f"{name}.{a}" in used else 0 for a, d in zip("xyz", dims, strict=True)])

    absent = [ln for ln, t in enumerate(warp.tids) if t is None]
    words = {"ctaid": axes("ctaid", warp.ctaid), "ntid": axes("ntid", launch.block),
             "nctaid": axes("nctaid", launch.grid),
             "lanes": sum(1 << (8 * ln + P.LaunchArea.EXITED) for ln in absent),
             "absent": sum(1 << ln for ln in absent)}
    for axis, a in enumerate("xyz"):
        if f"tid.{a}" in used:
            words[f"tid.{a}"] = _bytes([t[axis] if t else 0 for t in warp.tids])
    if layout.shared_words:
        words["shared"] = layout.shared_base + warp.cta * layout.shared_words
        words["window"] = layout.shared_words
    if layout.spill is not None:
        words["spill"] = layout.spill.word(warp.cta, warp.index * simt.LANES, 0)
    return words


def initial_memory(layout) -> dict[int, int]:
    """The record address → word of the machine memory as the launch lays it
    out (`layout`: parameters, bounds pairs, buffers)."""
    return dict(enumerate(layout.words[:layout.total]))


def launch_area(used: set[str], launch: Launch, layout, entered) -> dict[int, int]:
    """The record address → word of the launch area of the warps that
    `entered` their slots: (slot, warp) pairs."""
    return {P.LAUNCH_AREA + P.LaunchArea.slot(slot, name): v
            for slot, w in entered for name, v in warp_words(used, launch, layout, w).items()}


def prompt(words: dict[int, int], memory: dict[int, int] | None = None) -> list[P.Token]:
    """Records of every word that differs from `memory` (at the launch:
    memory starts at zero)."""
    out: list[P.Token] = []
    for address in sorted(words):
        if words[address] != (memory or {}).get(address, 0):
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
    layout = memory_layout(kernel, launch)
    residency = Residency(make_warps(launch, 0, 0), vocab.warps)
    block: dict[Warp, int] = {}
    exited = vocab.blocks

    def done(w: Warp) -> bool:
        return block[w] == exited

    def enter() -> dict[int, int]:
        entered = residency.admit(done)
        block.update((w, 0) for _, w in entered)
        return launch_area(used, launch, layout, entered)

    used = specials_read(kernel)
    words = initial_memory(layout) | enter()
    stream: list[P.Token] = []
    memory: dict[int, int] = {}
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
    held: set[Warp] = set()           # warps whose live lanes all wait at a barrier
    steps = 0
    while live := [(s, w) for s, w in residency.resident() if not done(w)]:
        for slot, w in live:
            if w in held:
                continue
            nxt = expect(append(P.Token("EXEC", w=slot, b=block[w])))
            steps += 1
            while nxt.kind != "END":
                if nxt.kind == "TRAP":
                    stream.append(nxt)
                    raise Trap(fault_message(kernel, launch, vocab.warps, w, nxt))
                if nxt.kind == "EXEC" or len(stream) > 64 * max_steps:
                    raise Trap(f"trap: at token {len(stream)} the step does not end "
                               f"({nxt.spelled()})")
                nxt = expect(append(nxt))
            append(nxt)
            block[w] = nxt.b
            if nxt.bar:
                held.add(w)
        if steps > max_steps:
            raise Trap(f"trap: the launch ran past the limit of {max_steps} EXEC steps "
                       "(an endless loop?)")
        release_barriers([w for _, w in live if not done(w)], held)
        for t in prompt(enter(), memory):     # the next CTAs' launch areas
            append(t)
    buffers: list[list | None] = []
    for i, arg in enumerate(launch.args):
        if i not in layout.bases:
            buffers.append(None)
            continue
        base, per = layout.bases[i], words_per_element(arg.type)
        buffers.append([decode_element(arg.type, [memory.get(base + k + j, 0)
                                                  for j in range(per)])
                        for k in range(0, layout.sizes[i], per)])
    n_prompt = len(launch_prompt)
    stats = {"tokens": len(stream), "prompt_tokens": n_prompt, "exec_steps": steps,
             "trace_tokens": len(stream) - n_prompt, "gpu_vocabulary": vocab.size}
    return TraceResult(buffers, stream, stats)


def fault_message(kernel: simt.KernelOp, launch: Launch, warps: int, w: Warp,
                  t: P.Token) -> str:
    """The machine's message for the fault `TRAP(s, l)` reports (warp `w`):
    the `simt` engine runs the launch to its first fault (the same warp
    slots, so the same order) and names the thread, the op and the address;
    if that fault is not the model's, the engines disagree and say so."""
    from qgc.runtime.simt_engine import describe, run_simt
    op = kernel.memory_sites()[t.site]
    where = f"{describe(op)} by {w.who(t.lane)}"
    try:
        run_simt(kernel.parent_op(), launch, resident_warps=warps)
    except Trap as err:
        if where in str(err):
            return str(err)
    return f"trap: the machine faults at {where}, where the simt engine does not"


def release_barriers(live: list[Warp], held: set[Warp]) -> None:
    """The host's barrier: a CTA whose every live warp waits goes on (an
    exited warp counts as arrived); as the `simt` engine releases them."""
    ctas: dict[int, list[Warp]] = {}
    for w in live:
        ctas.setdefault(w.cta, []).append(w)
    for members in ctas.values():
        if all(w in held for w in members):
            held.difference_update(members)
    if live and all(w in held for w in live):
        raise Trap("trap: every warp waits at a barrier that cannot be released")


def tensor_stepper(program, vocab: P.Vocabulary, record: list | None = None) -> Stepper:
    """The ideal `tensor` engine as a stepper: one run of the program per
    token (compiled once: the program must not change meanwhile), the
    memories kept from token to token; `record` collects (token, outputs)."""
    from qgc.runtime.tensor_engine import tensor_runner
    run = tensor_runner(program)
    state: dict = {}

    def step(t: P.Token) -> P.Token | None:
        nonlocal state
        out, state = run(vocab.inputs(t), state)
        if record is not None:
            record.append((t, out))
        try:
            return vocab.from_outputs(out)
        except ValueError:
            return None
    return step
