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

from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from qgc import protocol as P
from qgc.dialects import simt
from qgc.machine.abi import memory_layout, read_buffers
from qgc.machine.warps import Residency, Warp, iter_warps
from qgc.runtime.launch import STEP_LIMITS, Launch, LaunchError, check_steps, step_limit_trap
from qgc.runtime.memory import Trap

STEP, DEFAULT_MAX_STEPS = STEP_LIMITS["tensor"]

#: A stepper takes the next token of the stream and returns the token the
#: machine names after it (its greedy continuation), or None where that is no
#: token of the vocabulary (the host ignores it after the prompt and after END).
#: A stepper may also have `prefill(tokens)`: the launch prompt in one go.
Stepper = Callable[[P.Token], P.Token | None]


class TokenMachine:
    """A token-level stepper seen step by step: `continue_with(host_tokens)`
    feeds the host's tokens (all but the last in one `prefill` where the
    stepper has one) and yields the tokens the machine names after them, each
    fed back before the next is named. The token named last (an `END`) is fed
    with the next call's tokens."""

    def __init__(self, stepper: Stepper):
        self.stepper, self.unfed = stepper, None

    def continue_with(self, host_tokens: list[P.Token]) -> Iterator[P.Token | None]:
        tokens = ([self.unfed] if self.unfed is not None else []) + host_tokens
        self.unfed = None
        prefill = getattr(self.stepper, "prefill", None)
        if prefill is not None and len(tokens) > 1:
            prefill(tokens[:-1])
            tokens = tokens[-1:]
        named = None
        for t in tokens:
            named = self.stepper(t)
        while named is not None:
            self.unfed = named
            yield named
            self.unfed = None
            named = self.stepper(named)
        yield None


@dataclass
class TraceResult:
    buffers: list[list | None]
    tokens: list[P.Token] = field(default_factory=list)   # prompt and trace, in order
    stats: dict[str, object] = field(default_factory=dict)
    #: predicted[i]: token i was named by the machine (after token i − 1)
    predicted: list[bool] = field(default_factory=list)


def specials_read(kernel: simt.KernelOp) -> frozenset[str]:
    return frozenset(op.which.data for op in kernel.walk() if isinstance(op, simt.SpecialOp))


def _bytes(values: list[int]) -> int:
    if any(not 0 <= v < 256 for v in values):
        raise LaunchError(f"the launch's geometry {values} does not fit the machine's "
                          "launch-area bytes (each value below 256)")
    return sum(v << (8 * i) for i, v in enumerate(values))


def check_geometry(used: set[str], launch: Launch) -> None:
    """Refuse up front a launch whose geometry, as far as the kernel reads it,
    does not fit the launch area's bytes (`warp_words` would, CTAs later)."""
    last = tuple(d - 1 for d in launch.grid), tuple(d - 1 for d in launch.block)
    for name, dims in (("ctaid", last[0]), ("nctaid", launch.grid), ("ntid", launch.block),
                       ("tid", last[1])):
        _bytes([d if f"{name}.{a}" in used else 0 for a, d in zip("xyz", dims, strict=True)])


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
             "lanes": 0, "flags": sum(1 << (8 * ln + P.LaunchArea.EXITED) for ln in absent),
             "absent": sum(1 << ln for ln in absent)}
    for axis, a in enumerate("xyz"):
        if f"tid.{a}" in used:
            words[f"tid.{a}"] = _bytes([t[axis] if t else 0 for t in warp.tids])
    if used & set(simt.WARP_SPECIALS):    # bytes: warpid, nwarpid
        words["warp"] = _bytes([warp.index, launch.warps_per_cta(simt.LANES)])
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


def launch_area(used: set[str], launch: Launch, layout, entered,
                vocab: P.Vocabulary) -> dict[int, int]:
    """The record address → word of the launch area of the warps that
    `entered` their slots: (slot, warp) pairs."""
    return {vocab.launch_area + P.LaunchArea.slot(slot, name): v
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
    """Reads records back from the stream: `A` opens one, the top `D` closes
    it. A token out of place is a protocol violation: a trap naming its
    position in the stream."""

    def __init__(self, memory: dict[int, int]):
        self.memory = memory
        self.address: int | None = None
        self.bytes: dict[int, int] = {}

    def feed(self, t: P.Token, position: int) -> None:
        if t.kind == "A":
            if self.address is not None:
                raise protocol_trap(position, t, "opens a record before the last one ended")
            self.address, self.bytes = t.a, {}
        elif t.kind == "D":
            if self.address is None:
                raise protocol_trap(position, t, "is a data byte outside a record")
            if t.j != len(self.bytes):
                raise protocol_trap(position, t, f"is byte {t.j} where byte {len(self.bytes)} "
                                                 "comes next")
            self.bytes[t.j] = t.v
            if t.top:
                self.memory[self.address] = sum(v << (8 * j) for j, v in self.bytes.items())
                self.address = None
        elif self.address is not None:
            raise protocol_trap(position, t, "comes before the open record ended")


def protocol_trap(position: int, t: P.Token | None, what: str) -> Trap:
    named = t.spelled() if t is not None else "no GPU token"
    return Trap(f"trap: protocol violation at token {position}: {named} {what}")


def step_limit(vocab: P.Vocabulary) -> int:
    """The most tokens one step can name: every record slot's record, then END."""
    return vocab.records * (1 + P.BYTES) + 1


def run_trace(kernel: simt.KernelOp, vocab: P.Vocabulary, launch: Launch, stepper: Stepper,
              max_steps: int = DEFAULT_MAX_STEPS) -> TraceResult:
    """The launch through `stepper` (a token-level `Stepper`, or a machine
    with `continue_with` such as the `generate` stepper). CTAs are made as
    they enter the warp slots; the launch is refused up front if it cannot fit
    `max_steps` EXEC steps or the launch area."""
    machine = stepper if hasattr(stepper, "continue_with") else TokenMachine(stepper)
    host = host_loop(kernel, vocab, launch, max_steps)
    request = next(host)
    while True:
        if request:                        # a step's host tokens: the machine's next run
            named = machine.continue_with(request)
        token = next(named, None)        # a machine that stops names no token
        try:
            request = host.send(token)
        except StopIteration as finished:
            return finished.value


#: what the host loop asks of the machine: its next named token after these
#: host tokens, or (an empty list) after the token it named last
Request = list[P.Token]


def host_loop(kernel: simt.KernelOp, vocab: P.Vocabulary, launch: Launch,
              max_steps: int = DEFAULT_MAX_STEPS, used: frozenset[str] | None = None
              ) -> Generator[Request, P.Token | None, TraceResult]:
    """The host's side of one launch as a generator: it yields a `Request`,
    is sent the token the machine names, and returns the `TraceResult`. The
    drivers are `run_trace` (one machine) and `run_traces` (a batch, which
    gives each the kernel's `specials_read` once: `used`)."""
    check_steps(launch, max_steps, STEP, simt.LANES)
    used = specials_read(kernel) if used is None else used
    check_geometry(used, launch)
    layout = memory_layout(kernel, launch)
    residency = Residency(iter_warps(launch, 0, 0), vocab.warps)
    block: dict[Warp, int] = {}          # each resident warp's next block
    exited = vocab.blocks

    def done(w: Warp) -> bool:
        return block[w] == exited

    def enter() -> dict[int, int]:
        entered = residency.admit(done)
        resident = {w for _, w in residency.resident()}
        for w in [w for w in block if w not in resident]:   # their CTAs have left
            del block[w]
        block.update((w, 0) for _, w in entered)
        return launch_area(used, launch, layout, entered, vocab)

    stream: list[P.Token] = []
    predicted: list[bool] = []
    memory: dict[int, int] = {}
    records = Records(memory)
    pending: list[P.Token] = []          # host tokens the machine has not seen yet

    def append(t: P.Token, named: bool) -> None:
        records.feed(t, len(stream))
        stream.append(t)
        predicted.append(named)
        if not named:
            pending.append(t)

    launch_prompt = prompt(initial_memory(layout) | enter())
    for t in launch_prompt:
        append(t, False)
    held: set[Warp] = set()           # warps whose live lanes all wait at a barrier
    steps = 0
    while live := [(s, w) for s, w in residency.resident() if not done(w)]:
        for slot, w in live:
            if w in held:
                continue
            append(P.Token("EXEC", w=slot, b=block[w]), False)
            steps += 1
            end = yield from run_step(pending, stream, append, step_limit(vocab))
            if end.kind == "TRAP":
                raise Trap(fault_message(kernel, launch, vocab.warps, w, end))
            block[w] = end.b
            if end.bar:
                held.add(w)
        if steps > max_steps:
            raise step_limit_trap(max_steps, STEP)
        release_barriers([w for _, w in live if not done(w)], held)
        for t in prompt(enter(), memory):     # the next CTAs' launch areas
            append(t, False)
    buffers = read_buffers(launch, layout, lambda a: memory.get(a, 0))
    n_prompt = len(launch_prompt)
    stats = {"tokens": len(stream), "prompt_tokens": n_prompt, "exec_steps": steps,
             "trace_tokens": len(stream) - n_prompt, "gpu_vocabulary": vocab.size}
    return TraceResult(buffers, stream, stats, predicted)


def run_step(pending: list[P.Token], stream: list[P.Token], append,
             limit: int) -> Generator[Request, P.Token | None, P.Token]:
    """One step: the pending host tokens (ending with `EXEC`) to the machine,
    then the tokens it names, appended up to its `END` or `TRAP`, which is
    returned; anything else out of place traps."""
    request = pending[:]
    pending.clear()
    count = 0
    while count < limit:
        t = yield request
        request = []
        if t is None or t.kind == "EXEC":
            raise protocol_trap(len(stream), t, f"follows {stream[-1].spelled()} (the machine "
                                                "never names EXEC or a text token)")
        if t.kind == "TRAP" and stream[-1].kind != "EXEC":
            raise protocol_trap(len(stream), t, "follows a record (a TRAP comes alone)")
        append(t, True)
        count += 1
        if t.kind in ("END", "TRAP"):
            return t
    raise protocol_trap(len(stream), None, f"ends the step after {count} tokens (at most "
                                           f"{limit} records and an END)")


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
        run_simt(kernel.parent_op() or kernel, launch, resident_warps=warps)
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


def run_traces(kernel: simt.KernelOp, vocab: P.Vocabulary, launches: Sequence[Launch],
               stepper, max_steps: int = DEFAULT_MAX_STEPS) -> list[TraceResult | Exception]:
    """Many launches of one kernel in lockstep through a batch stepper (one
    launch a row: `stepper.step(ids, active)` takes each row's next token id
    and names the id after it, as `NumbaStepper` does). Each launch's host
    loop runs as in `run_trace`; a row feeds its host tokens one a step, or
    all but the last before the step where the stepper has
    `prefill_rows(rows, ids)` (every row's at once), and sits idle once its
    launch is done. Returns each launch's result, or the error it stopped
    with."""
    used = specials_read(kernel)
    hosts = [host_loop(kernel, vocab, launch, max_steps, used) for launch in launches]
    results: list[TraceResult | Exception | None] = [None] * len(hosts)
    queues: list[deque[P.Token]] = [deque() for _ in hosts]   # what each row feeds next

    def answer(row: int, named: P.Token | None) -> None:
        """Hand the host the token its machine named (None: start) and queue
        what it asks: that token is fed first, then any host tokens."""
        try:
            request = next(hosts[row]) if named is None else hosts[row].send(named)
        except StopIteration as finished:
            results[row] = finished.value
            return
        except (Trap, LaunchError) as err:
            results[row] = err
            return
        queues[row] = deque(([named] if named is not None else []) + request)

    for row in range(len(hosts)):
        answer(row, None)
    ids = np.zeros(len(hosts), np.int64)
    prefill_rows = getattr(stepper, "prefill_rows", None)
    while any(r is None for r in results):
        active = np.array([r is None for r in results])
        rows, prompts = [], []
        for row in np.flatnonzero(active):
            if prefill_rows is not None and len(queues[row]) > 1:
                rows.append(int(row))
                prompts.append(np.array([vocab.id_of(queues[row].popleft())
                                         for _ in range(len(queues[row]) - 1)], np.int64))
            ids[row] = vocab.id_of(queues[row].popleft())
        if rows:
            prefill_rows(rows, prompts)
        next_ids = stepper.step(ids, active)
        for row in np.flatnonzero(active):
            if not queues[row]:          # its last token is fed: the machine's answer
                answer(row, vocab.token(int(next_ids[row])))
    return results  # type: ignore[return-value]
