"""`tensor.program`, the checks of its schedule and the analyses of the bits'
lifetimes they (and the scheduler) run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I64, IntegerAttr, StringAttr, SymbolNameConstraint
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import IsolatedFromAbove, NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from qgc.dialects.tensor.attributes import ThresholdRow, i64_attr, width_of
from qgc.dialects.tensor.ops import (
    ClearOp,
    ConcatOp,
    InputOp,
    KvReadOp,
    KvWriteOp,
    MemoryOp,
    MergeOp,
    OutputOp,
    PadOp,
    PlacedOp,
    SliceOp,
    TensorOp,
    ThresholdOp,
    coords_prop,
    half_index,
)


class ScheduleChecks(IRDLOperation):
    """The checks `ProgramOp.verify_` runs on a scheduled program: placements,
    limits, dataflow across halves and coordinates shared along lifetimes."""

    def _verify_schedule(self) -> None:
        """Every op placed, within the limits, without collisions; coordinates
        shared only along lifetimes (`_verify_lifetimes`)."""
        name = self.program_name
        n_layers, hidden = self.limit("layers"), self.limit("hidden")
        inter, heads = self.limit("intermediate"), self.limit("heads")
        assert n_layers is not None and hidden is not None and inter is not None \
            and heads is not None
        owner: dict[int, str] = {self.FLAG: "the flag"}
        bit_coords: dict[int, list[tuple[Operation, str]]] = {}
        heads_used: dict[tuple[int, int], str] = {}
        neurons_used: dict[int, list[tuple[int, int, str]]] = {}
        clears: dict[int, list[ClearOp]] = {}

        def claim(coords: Iterable[int], who: str, op: Operation | None = None) -> None:
            """A pad (op None) owns its coordinate; bits may share theirs along
            lifetimes, checked after all placements."""
            for c in coords:
                if not 0 <= c < hidden:
                    raise VerifyException(f"{who} is placed on coordinate {c}, outside "
                                          f"hidden {hidden}")
                other = owner.get(c)
                if other is None and op is None and c in bit_coords:
                    other = bit_coords[c][0][1]
                if other is not None:
                    raise VerifyException(f"{who} and {other} share coordinate {c}")
                if op is None:
                    owner[c] = who
                else:
                    bit_coords.setdefault(c, []).append((op, who))

        for op in self.body.block.ops:
            if isinstance(op, SliceOp | ConcatOp | OutputOp | MergeOp):
                continue
            who = op.name
            if isinstance(op, PadOp):
                claim([op.coord.value.data], f"tensor.pad {op.coord.value.data}")
                continue
            if isinstance(op, InputOp):
                if op.coords is None:
                    raise VerifyException(f"input '{op.input_name.data}' of scheduled program "
                                          f"@{name} has no coordinates")
                claim(coords_prop(op) or [], f"input '{op.input_name.data}'", op)
                continue
            if isinstance(op, KvWriteOp):
                continue  # placed through its memory
            assert isinstance(op, PlacedOp)
            layer = op.placed_layer
            if layer is None:
                raise VerifyException(f"{who} of scheduled program @{name} is not placed")
            if not 0 <= layer < n_layers:
                raise VerifyException(f"{who} is placed in layer {layer} of {n_layers}")
            if isinstance(op, MemoryOp):
                assert op.head is not None
                head = op.head.value.data
                if not 0 <= head < heads:
                    raise VerifyException(f"memory @{op.memory_name} is placed on head {head} "
                                          f"of {heads}")
                if (layer, head) in heads_used:
                    raise VerifyException(f"memory @{op.memory_name} and "
                                          f"{heads_used[(layer, head)]} share head {head} of "
                                          f"layer {layer}")
                heads_used[(layer, head)] = f"memory @{op.memory_name}"
            if isinstance(op, KvReadOp):
                mem = op.memory_op()
                if op.placed_layer != mem.placed_layer or op.head is None or \
                        mem.head is None or op.head.value.data != mem.head.value.data:
                    raise VerifyException(f"tensor.kv_read of @{mem.memory_name} is not placed "
                                          "on its memory's layer and head")
                if op.coords is None:
                    raise VerifyException(f"tensor.kv_read of @{mem.memory_name} has no "
                                          "coordinates")
                merge = merge_of(op)
                if merge is None or merge.first_read() is op:   # a merge's reads share
                    claim(coords_prop(op) or [], f"the kv_read of @{mem.memory_name}", op)
            if isinstance(op, ThresholdOp | ClearOp):
                if op.neurons is None or op.coords is None:
                    raise VerifyException(f"a scheduled {op.name} names its neurons and "
                                          "coordinates")
                lo, hi = op.neurons.get_values()
                if lo < 1 or hi > inter:
                    raise VerifyException(f"{op.name} neurons [{lo}, {hi}) are outside "
                                          f"[1, {inter}) (neuron 0 is the constant)")
                for a, b, other in neurons_used.get(layer, []):
                    if lo < b and a < hi:
                        raise VerifyException(f"{op.name} neurons [{lo}, {hi}) overlap "
                                              f"{other} in layer {layer}")
                neurons_used.setdefault(layer, []).append((lo, hi, f"neurons [{lo}, {hi})"))
                who = f"{op.name} neurons [{lo}, {hi}) of layer {layer}"
                if isinstance(op, ClearOp):
                    for c in op.cleared_coords():
                        if not 0 <= c < hidden or c in owner:
                            raise VerifyException(f"{who} clears coordinate {c}, which holds "
                                                  "no bits")
                        clears.setdefault(c, []).append(op)
                else:
                    claim(coords_prop(op) or [], who, op)
        for op in self.body.block.ops:
            if isinstance(op, KvWriteOp):
                mem = op.memory_op()
                if mem.layer is None:
                    raise VerifyException(f"memory @{mem.memory_name} of scheduled program "
                                          f"@{name} is not placed")
                if op.placed_layer != mem.placed_layer or op.head is None or \
                        mem.head is None or op.head.value.data != mem.head.value.data:
                    raise VerifyException(f"tensor.kv_write of @{mem.memory_name} is not "
                                          "placed on its memory's layer and head")
        self._verify_dataflow()
        self._verify_lifetimes(bit_coords, clears)

    def _verify_dataflow(self) -> None:
        """Every bit an op reads is ready before its half: after the half of
        its producer (views look through; a merge's bits after its last
        read). A threshold reads only the bits its rows name."""
        ready: dict[SSAValue, list[int]] = {}
        for op in self.body.block.ops:
            if isinstance(op, ThresholdOp | KvReadOp | KvWriteOp):
                h = half_index(op)
                flat = [r for v in op.operands for r in ready.get(v, [])]
                used = op.read_bits() if isinstance(op, ThresholdOp) else range(len(flat))
                late = max((flat[i] for i in used if i < len(flat)), default=-1)
                if late >= h:
                    raise VerifyException(f"{op.name} in half {h} reads a bit ready only "
                                          f"after half {late}")
            if isinstance(op, InputOp):
                ready[op.result] = [-1] * width_of(op.result)
            elif isinstance(op, ThresholdOp | KvReadOp):
                ready[op.result] = [half_index(op)] * width_of(op.result)
            elif isinstance(op, SliceOp):
                ready[op.result] = ready[op.input][op.lo.value.data:op.hi.value.data]
            elif isinstance(op, ConcatOp):
                ready[op.result] = [r for v in op.inputs for r in ready[v]]
            elif isinstance(op, MergeOp):
                last = max(half_index(r) for r in op.reads())
                ready[op.result] = [last] * width_of(op.result)

    def _verify_lifetimes(self, bit_coords: dict[int, list[tuple[Operation, str]]],
                          clears: dict[int, list[ClearOp]]) -> None:
        """Bits share a coordinate only one after another, in every *view*:
        the tokens on which group g runs see the ungrouped bits and g's (the
        other groups' are zero there), the tokens on which none runs the
        ungrouped ones. In a view, a later bit is written onto −1: after a
        clear of the coordinate (`tensor.clear`, ungrouped or of the group) in
        an MLP half from the earlier bit's last read on (a read in half h sees
        h's input), or by a threshold that `overwrites` it, in an MLP half no
        earlier than that last read. An output is never overwritten, an input
        is the first holder, and a clear clears dead bits only."""
        reads = bit_reads(self)
        keys = lambda op: [(op, c) for c in coords_prop(op) or []]  # noqa: E731
        exposed = exposed_bits(self, keys)
        for c in bit_coords.keys() | clears.keys():
            holders, cs = bit_coords.get(c, []), clears.get(c, [])
            # (half, kind, op, who, view): a bit read outside its group as it is
            # holds the coordinate in every view
            timed = sorted([(birth_half(op), 1, op, who,
                             None if (op, c) in exposed else getattr(op, "group_index", None))
                            for op, who in holders]
                           + [(half_index(op), 0, op, f"tensor.clear of layer "
                               f"{op.placed_layer}", op.group_index) for op in cs],
                           key=lambda t: t[:2])
            if isinstance(timed[0][2], ThresholdOp) and c in timed[0][2].overwritten_coords():
                raise VerifyException(f"{timed[0][3]} overwrites coordinate {c}, which holds "
                                      "no earlier bit")
            for view in {t[4] for t in timed} | {None}:
                self._verify_view(c, [t[:4] for t in timed if t[4] in (None, view)], reads,
                                  view)

    @staticmethod
    def _verify_view(c: int, timed: list, reads: dict[tuple[Operation, int], int],
                     view: int | None) -> None:
        """One view's holders and clears of coordinate c, in time order (a
        grouped threshold's copy neurons act in its group's view only)."""
        held = None                   # (birth, op, who) of the bit there, cleared: None
        last_bit = None
        cleared_at = None             # the half of the last clear
        for when, is_bit, op, who in timed:
            if not is_bit:
                if cleared_at == when:
                    raise VerifyException(f"{who} clears coordinate {c} twice in half {when}")
                cleared_at = when
                if held is None and last_bit is None:
                    continue          # nothing there in this view: a no-op
                if held is not None:
                    last = reads.get((held[1], c), held[0])
                    if last > when or held[0] >= when:
                        until = "the end (an output)" if last == LIVE_TO_END else \
                            f"half {last}"
                        raise VerifyException(f"{who} clears coordinate {c} in half {when}, "
                                              f"but {held[2]} is read there until {until}")
                held = None
                continue
            if held is not None:
                b0, op0, who0 = held
                if b0 == when or not isinstance(op, ThresholdOp) or \
                        c not in op.overwritten_coords() or \
                        op.group_index not in (None, view):
                    raise VerifyException(f"{who} and {who0} share coordinate {c}")
                last = reads.get((op0, c), b0)
                if last > when:
                    until = "the end (an output)" if last == LIVE_TO_END else f"half {last}"
                    raise VerifyException(f"{who} overwrites coordinate {c} in half {when}, "
                                          f"but {who0} is read there until {until}")
            elif isinstance(op, InputOp) and last_bit is not None:
                raise VerifyException(f"{who} and {last_bit} share coordinate {c}")
            elif cleared_at == when and isinstance(op, ThresholdOp) and \
                    c in op.overwritten_coords():
                raise VerifyException(f"{who} overwrites coordinate {c}, which a clear resets "
                                      f"in the same half {when}")
            held = (when, op, who)
            last_bit = who


@irdl_op_definition
class ProgramOp(ScheduleChecks):
    """One step of the machine, as bit-level ops in dataflow order:

        tensor.program @step { ... }
        tensor.program @step layers 3 hidden 1024 intermediate 3584 heads 16 { ... }

    `groups "g"` names an input of which at most one bit is set per token:
    ops marked `group k` give zero bits unless bit k is set (the blocks of a
    machine step, only one of which runs), so the scheduler lets different
    groups' bits share coordinates.

    The second form is scheduled (`tensor-schedule-layers`): `layers` stock
    decoder layers for a config of that hidden size, at most `intermediate`
    MLP neurons and `heads` linear-attention heads per layer. Coordinate 0 is
    the flag (8 on every GPU token, exactly 1 after each RMSNorm); neuron 0 of
    every MLP half that computes is the constant neuron (output exactly 1).
    """

    name = "tensor.program"
    sym_name = prop_def(SymbolNameConstraint())
    layers = opt_prop_def(IntegerAttr[I64])
    hidden = opt_prop_def(IntegerAttr[I64])
    intermediate = opt_prop_def(IntegerAttr[I64])
    heads = opt_prop_def(IntegerAttr[I64])
    groups = opt_prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), IsolatedFromAbove(), SymbolOpInterface(), SymbolTable())
    assembly_format = (
        "$sym_name (`groups` $groups^)? (`layers` $layers^ `hidden` $hidden `intermediate` "
        "$intermediate `heads` $heads)? attr-dict-with-keyword $body")

    FLAG: ClassVar[int] = 0
    LIMITS: ClassVar[tuple[str, ...]] = ("layers", "hidden", "intermediate", "heads")

    def __init__(self, name: str, ops: Sequence[Operation] = ()):
        super().__init__(properties={"sym_name": StringAttr(name)},
                         regions=[Region(Block(list(ops)))])

    @property
    def program_name(self) -> str:
        return self.sym_name.data

    @property
    def scheduled(self) -> bool:
        return self.layers is not None

    @property
    def groups_input(self) -> str | None:
        return None if self.groups is None else self.groups.data

    def group_bits(self) -> int:
        """Width of the `groups` input (0 without one)."""
        name = self.groups_input
        widths = [width_of(op.result) for op in self.inputs() if op.input_name.data == name]
        return widths[0] if widths else 0

    def limit(self, name: str) -> int | None:
        attr = getattr(self, name)
        return None if attr is None else attr.value.data

    def set_limit(self, name: str, value: int) -> None:
        self.properties[name] = i64_attr(value)

    def ops(self) -> list[Operation]:
        return list(self.body.block.ops)

    def memories(self) -> dict[str, MemoryOp]:
        return {op.memory_name: op for op in self.body.block.ops if isinstance(op, MemoryOp)}

    def memory_named(self, name: str) -> MemoryOp | None:
        """`memories().get(name)`, from a table kept between calls: passes and
        the verifier ask once per memory access, over thousands of ops. A hit
        is checked still to be this program's memory of that name; a miss
        rebuilds the table (a memory added, removed or renamed since)."""
        table = self.__dict__.get("_memory_table")
        mem = None if table is None else table.get(name)
        if mem is None or mem.parent is not self.body.block or mem.memory_name != name:
            table = self.memories()
            object.__setattr__(self, "_memory_table", table)
            mem = table.get(name)
        return mem

    def inputs(self) -> list[InputOp]:
        return [op for op in self.body.block.ops if isinstance(op, InputOp)]

    def outputs(self) -> list[OutputOp]:
        return [op for op in self.body.block.ops if isinstance(op, OutputOp)]

    def pads(self) -> list[PadOp]:
        return [op for op in self.body.block.ops if isinstance(op, PadOp)]

    def verify_(self) -> None:
        name = self.program_name
        names: dict[str, set[str]] = {"input": set(), "output": set()}
        access: dict[tuple[str, str], Operation] = {}
        n_groups = self.group_bits()
        if self.groups_input is not None and not n_groups:
            raise VerifyException(f"tensor.program @{name}: groups input "
                                  f"'{self.groups_input}' is not an input of the program")
        for op in self.body.block.ops:
            g = getattr(op, "group_index", None)
            if g is not None and not 0 <= g < n_groups:
                raise VerifyException(f"{op.name} of group {g}: tensor.program @{name} has "
                                      f"{n_groups} groups (its `groups` input)")
            if not isinstance(op, TensorOp):
                raise VerifyException(f"'{op.name}' cannot appear in tensor.program @{name}")
            if isinstance(op, InputOp | OutputOp):
                kind = "input" if isinstance(op, InputOp) else "output"
                label = (op.input_name if isinstance(op, InputOp) else op.output_name).data
                if label in names[kind]:
                    raise VerifyException(f"tensor.program @{name} has two {kind}s named "
                                          f"'{label}'")
                names[kind].add(label)
            if isinstance(op, KvWriteOp | KvReadOp):
                kind = "write" if isinstance(op, KvWriteOp) else "read"
                key = (op.memory_name, kind)
                if key in access:
                    raise VerifyException(
                        f"memory @{op.memory_name} is {kind}-accessed twice in one step; a head "
                        f"takes one write and one read per token")
                if kind == "write" and (op.memory_name, "read") in access:
                    raise VerifyException(
                        f"memory @{op.memory_name}: the kv_write must come before the kv_read "
                        "(the read sees the write of the same token)")
                access[key] = op
        if self.scheduled:
            for limit in self.LIMITS:
                if getattr(self, limit) is None:
                    raise VerifyException(f"tensor.program @{name}: a schedule records "
                                          f"layers, hidden, intermediate and heads")
            self._verify_schedule()


#: The last-read half of an output bit: it lives to the end.
LIVE_TO_END = 1 << 30


def birth_half(op: Operation) -> int:
    """The half after which a value exists (inputs: −1, before the first)."""
    return -1 if isinstance(op, InputOp) else half_index(op)


def bit_reads(program: ProgramOp) -> dict[tuple[Operation, int], int]:
    """The last half that reads each (producing op, coordinate) of a scheduled
    program (`last_reads`)."""
    return last_reads(program, lambda op: [(op, c) for c in coords_prop(op) or []])


def bit_sources(program: ProgramOp, keys):
    """Walk the program's ops, yielding (op, src) with `src` mapping every
    value defined so far (op's results included) to its bits, named by
    `keys(op)` for the inputs, thresholds and reads; slices and concats are
    views, a merge's bits are its first read's (the coordinates they share)."""
    src: dict[SSAValue, list] = {}
    for op in program.body.block.ops:
        if isinstance(op, InputOp | ThresholdOp | KvReadOp):
            src[op.result] = keys(op)
        elif isinstance(op, SliceOp):
            src[op.result] = src[op.input][op.lo.value.data:op.hi.value.data]
        elif isinstance(op, ConcatOp):
            src[op.results[0]] = [b for v in op.operands for b in src[v]]
        elif isinstance(op, MergeOp):
            src[op.result] = src[op.first_read().result]
        yield op, src


def last_reads(program: ProgramOp, keys) -> dict:
    """The last half that reads each bit, bits named by `keys(op)`
    (`bit_sources`): a threshold and a memory access read at their half's
    input, an output at the end; the `groups` input lives to the end (grouped
    ops, clears too, are gated on it); a merge's bits live on its first read's
    coordinates until its last read has written them (one half after it)."""
    last: dict = {}
    for op, src in bit_sources(program, keys):
        if isinstance(op, InputOp) and op.input_name.data == program.groups_input:
            last.update((b, LIVE_TO_END) for b in src[op.result])
        elif isinstance(op, MergeOp) and all(r.placed_layer is not None for r in op.reads()):
            written = max(half_index(r) for r in op.reads()) + 1
            for b in src[op.result]:
                last[b] = max(last.get(b, written), written)
        for b, half in read_points(op, src):
            last[b] = max(last.get(b, half), half)
    return last


def exposed_bits(program: ProgramOp, keys) -> set:
    """Grouped bits something outside their group reads as they are (an
    output, a memory access, a threshold part not gated by the group's bit):
    it must see them zero while the group does not run, so they take
    coordinates that hold −1 in every view. A part is gated when it cannot
    reach its threshold without the group's bit."""
    group_of: dict = {}
    gate: list = []
    exposed: set = set()
    for op, src in bit_sources(program, keys):
        if isinstance(op, InputOp | ThresholdOp | KvReadOp):
            g = getattr(op, "group_index", None)
            group_of.update((b, g) for b in src[op.result])
            if isinstance(op, InputOp) and op.input_name.data == program.groups_input:
                gate = src[op.result]
        if isinstance(op, OutputOp | KvWriteOp | KvReadOp):
            mine = getattr(op, "group_index", None)
            exposed.update(b for v in op.operands for b in src[v]
                           if group_of.get(b) is not None and group_of[b] != mine)
        elif isinstance(op, ThresholdOp):
            mine = op.group_index
            flat = [b for v in op.inputs for b in src[v]]
            for row in op.row_list():
                for _, part in row.parts:
                    for i, _w in part.terms:
                        g = group_of.get(flat[i])
                        if g is not None and g != mine and not _gated(part, flat, gate, g):
                            exposed.add(flat[i])
    return exposed


def _gated(part: ThresholdRow, flat: list, gate: list, g: int) -> bool:
    """Whether the part needs group bit g set to reach its threshold."""
    if g >= len(gate):
        return False
    w = sum(w for i, w in part.terms if flat[i] == gate[g])
    rest = sum(w for i, w in part.terms if flat[i] != gate[g] and w > 0)
    return w > 0 and rest < part.threshold


def merge_of(op: Operation) -> MergeOp | None:
    """The tensor.merge that takes this read's bits, if one does."""
    uses = op.results[0].uses if op.results else ()
    for use in uses:
        if isinstance(use.operation, MergeOp):
            return use.operation
    return None


def read_points(op: Operation, src: dict[SSAValue, list]):
    """(bit, half) for every bit `op` reads, bits named through `src` (each
    value's bits): a threshold and a memory access read at their half's input,
    only the bits their rows and keys use; an output at the end."""
    if isinstance(op, OutputOp):
        return [(b, LIVE_TO_END) for b in src.get(op.value, [])]
    if isinstance(op, ThresholdOp):
        flat = [b for v in op.inputs for b in src.get(v, [])]
        half = half_index(op)
        return [(flat[i], half) for i in op.read_bits() if i < len(flat)]
    if isinstance(op, KvWriteOp | KvReadOp):
        half = half_index(op)
        return [(b, half) for v in op.operands for b in src.get(v, [])]
    return []
