"""The ops inside a `tensor.program` (the program itself: `program.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from qgc.dialects.tensor.assembly import (
    Keyword,
    Placement,
    Ranges,
    Rows,
    Slice,
    coords_of,
    ranges_of,
)
from qgc.dialects.tensor.attributes import (
    KEY_KINDS,
    MAX_ACTIVE_GATE,
    MAX_MEMORY_SLOTS,
    MAX_MEMORY_WIDTH,
    BitsType,
    Row,
    RowAttr,
    SumAttr,
    ThresholdRow,
    bits,
    i64_array,
    i64_attr,
    plural,
    width_of,
)

# -------------------------------------------------------------------------- ops

class TensorOp(IRDLOperation):
    """Common base of the ops inside a `tensor.program`."""


class PlacedOp(TensorOp):
    """An op the scheduler places in a layer half (`layer`, `half`)."""

    layer = opt_prop_def(IntegerAttr[I64])
    half = opt_prop_def(StringAttr)

    @property
    def placed_layer(self) -> int | None:
        return None if self.layer is None else self.layer.value.data

    @property
    def placed_half(self) -> str | None:
        return None if self.half is None else self.half.data

    def place(self, layer: int, half: str) -> None:
        self.properties["layer"] = i64_attr(layer)
        self.properties["half"] = StringAttr(half)

    def unplace(self) -> None:
        for name in ("layer", "half", "head", "neurons", "coords", "overwrites"):
            self.properties.pop(name, None)

    def _verify_half(self, want: str) -> None:
        if (self.layer is None) != (self.half is None):
            raise VerifyException(f"{self.name}: a placement needs both a layer and a half")
        if self.half is not None and self.half.data != want:
            raise VerifyException(f"{self.name} runs in the {want} half of a layer, "
                                  f"not the {self.half.data} half")


def coords_prop(op: Operation, name: str = "coords") -> list[int] | None:
    coords = op.properties.get(name)
    return None if coords is None else coords_of(coords.get_values())  # type: ignore[union-attr]


def _check_coords(op: Operation, width: int) -> None:
    coords = coords_prop(op)
    if coords is not None and len(coords) != width:
        raise VerifyException(f"{op.name}: {plural(len(coords), 'coordinate')} placed for "
                              f"{plural(width, 'bit')}")


@irdl_op_definition
class InputOp(TensorOp):
    """Bits the token embedding provides: `%a = tensor.input "a" : !tensor.bits<32>`
    (after scheduling: `tensor.input "a" coords [1, 33) : !tensor.bits<32>`)."""

    name = "tensor.input"
    input_name = prop_def(StringAttr)
    coords = opt_prop_def(DenseArrayBase.constr(i64))
    result = result_def(BitsType)
    custom_directives = (Ranges,)
    assembly_format = "$input_name (`coords` custom<Ranges>($coords)^)? attr-dict `:` type($result)"

    def __init__(self, name: str, width: int):
        super().__init__(properties={"input_name": StringAttr(name)}, result_types=[bits(width)])

    def verify_(self) -> None:
        _check_coords(self, width_of(self.result))


@irdl_op_definition
class OutputOp(TensorOp):
    """Bits the step produces: `tensor.output "sum" %s : !tensor.bits<32>`."""

    name = "tensor.output"
    output_name = prop_def(StringAttr)
    value = operand_def(BitsType)
    assembly_format = "$output_name $value attr-dict `:` type($value)"

    def __init__(self, name: str, value: SSAValue):
        super().__init__(properties={"output_name": StringAttr(name)}, operands=[value])


@irdl_op_definition
class SliceOp(TensorOp):
    """A range of bits, free (a view of coordinates):
    `%lo = tensor.slice %a [0, 4) : !tensor.bits<32> -> !tensor.bits<4>`."""

    name = "tensor.slice"
    input = operand_def(BitsType)
    lo = prop_def(IntegerAttr[I64])
    hi = prop_def(IntegerAttr[I64])
    result = result_def(BitsType)
    custom_directives = (Slice,)
    assembly_format = "$input custom<Slice>($lo, $hi) attr-dict `:` type($input) `->` type($result)"

    def __init__(self, value: SSAValue, lo: int, hi: int):
        super().__init__(operands=[value], properties={"lo": i64_attr(lo), "hi": i64_attr(hi)},
                         result_types=[bits(hi - lo)])

    def verify_(self) -> None:
        lo, hi = self.lo.value.data, self.hi.value.data
        if not 0 <= lo < hi <= width_of(self.input):
            raise VerifyException(f"tensor.slice [{lo}, {hi}) is outside "
                                  f"!tensor.bits<{width_of(self.input)}>")
        if width_of(self.result) != hi - lo:
            raise VerifyException(f"tensor.slice [{lo}, {hi}) gives {hi - lo} bits, not "
                                  f"{width_of(self.result)}")


@irdl_op_definition
class ConcatOp(TensorOp):
    """Bits side by side, free (a view of coordinates):
    `%ab = tensor.concat %a, %b : !tensor.bits<4>, !tensor.bits<4> -> !tensor.bits<8>`."""

    name = "tensor.concat"
    inputs = var_operand_def(BitsType)
    result = result_def(BitsType)
    assembly_format = "$inputs attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[list(values)],
                         result_types=[bits(sum(width_of(v) for v in values))])

    def verify_(self) -> None:
        total = sum(width_of(v) for v in self.inputs)
        if total != width_of(self.result):
            raise VerifyException(f"tensor.concat of {total} bits gives "
                                  f"!tensor.bits<{width_of(self.result)}>")


@irdl_op_definition
class MergeOp(TensorOp):
    """Reads of which at most one gives set bits, on shared coordinates (a
    gather across memories, free):
    `%r = tensor.merge %r0, %r1 : !tensor.bits<8>, !tensor.bits<8> -> !tensor.bits<8>`.
    Each operand is a `tensor.kv_read` used by this merge alone; scheduled,
    they all write onto the same coordinates (−1 on entry), each adding its
    row's set bits, so the result is the one read that gave any (zero if
    none). Two reads giving set bits in one token are an error of the
    program."""

    name = "tensor.merge"
    inputs = var_operand_def(BitsType)
    result = result_def(BitsType)
    assembly_format = "$inputs attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[list(values)], result_types=[bits(width_of(values[0]))])

    def reads(self) -> list[KvReadOp]:
        return [v.owner for v in self.inputs]  # type: ignore[misc]

    def first_read(self) -> KvReadOp:
        """The read placed first (the earliest half, then operand order): the
        merge's bits live on its coordinates from its half on."""
        reads = self.reads()
        if any(r.placed_layer is None for r in reads):
            return reads[0]
        return min(reads, key=lambda r: half_index(r))

    def verify_(self) -> None:
        if not self.inputs:
            raise VerifyException("tensor.merge takes at least one read")
        for v in self.inputs:
            if not isinstance(v.owner, KvReadOp):
                raise VerifyException("tensor.merge merges the results of tensor.kv_read ops")
            if width_of(v) != width_of(self.result):
                raise VerifyException(f"tensor.merge of !tensor.bits<{width_of(v)}> gives "
                                      f"!tensor.bits<{width_of(self.result)}>")
            if len(list(v.uses)) != 1:
                raise VerifyException("a read that tensor.merge takes has no other use (it "
                                      "shares the merge's coordinates)")
        if len({r.group_index for r in self.reads()}) > 1:
            raise VerifyException("the reads of a tensor.merge belong to one group (or none): "
                                  "they share coordinates")
        placed = [coords_prop(r) for r in self.reads()]
        if any(c != placed[0] for c in placed):
            raise VerifyException("the reads of a tensor.merge are placed on the same "
                                  "coordinates")


@irdl_op_definition
class ThresholdOp(PlacedOp):
    """A group of SwiGLU neurons in an MLP half; output bit j is
    `[Σ_i w_ji·x_i ≥ t_j]` over the operands' bits x (concatenated, 0/1):

        %c = tensor.threshold %a, %b [{0 = 1, 4 = 1} >= 2, {0 = 1, 4 = 1} >= 1]
            : !tensor.bits<4>, !tensor.bits<4> -> !tensor.bits<2>

    Weights are integers, thresholds integers or halves. Each row costs 0, 1 or
    2 neurons (`ThresholdRow.gadget`). A row may also be a sum of such parts
    (`SumRow`), `{0 = 1, 4 = 1} >= 1 - (>= 2)` (here the XOR of bits 0 and 4),
    as long as it stays 0 or 1; its neurons are its parts', and equal parts of
    one op share them (`distinct_parts`). After scheduling:
    `... at layer 0 mlp neurons [1, 4) coords [9, 11) : ...`. An output
    coordinate may reuse one whose previous bit is dead by this half
    (`... coords [3, 5) [9, 10) overwrites [3, 5) : ...`): each such bit costs
    one more neuron, a copy of the old bit with down weight −2 (so the
    coordinate moves from 2·old−1 to 2f−1). A grouped op (`... group 2 ...`)
    gives zero bits unless its group runs (bit 2 of the program's `groups`
    input): its neurons take their up projection from that bit.
    """

    name = "tensor.threshold"
    inputs = var_operand_def(BitsType)
    rows = prop_def(ArrayAttr[RowAttr | SumAttr])
    neurons = opt_prop_def(DenseArrayBase.constr(i64))
    coords = opt_prop_def(DenseArrayBase.constr(i64))
    overwrites = opt_prop_def(DenseArrayBase.constr(i64))
    head = opt_prop_def(IntegerAttr[I64])
    group = opt_prop_def(IntegerAttr[I64])
    result = result_def(BitsType)
    custom_directives = (Rows, Placement, Ranges)
    assembly_format = (
        "$inputs custom<Rows>($rows) (`group` $group^)? "
        "(`at` custom<Placement>($layer, $half, $head, $neurons, $coords)^)? "
        "(`overwrites` custom<Ranges>($overwrites)^)? "
        "attr-dict `:` type($inputs) `->` type($result)")

    def __init__(self, values: Sequence[SSAValue], rows: Sequence[RowAttr | SumAttr]):
        super().__init__(operands=[list(values)],
                         properties={"rows": ArrayAttr(list(rows))},
                         result_types=[bits(len(rows))])

    @staticmethod
    def _verify_rows(rows: Sequence[Row], n_in: int) -> None:
        """Every part reads bits of the operands, each once, and has a gadget."""
        for j, row in enumerate(rows):
            for _, part in row.parts:
                lo, hi, twice = part.index_span()
                if lo < 0 or hi >= n_in or twice:
                    seen = set()
                    for i, _ in part.terms:
                        if not 0 <= i < n_in:
                            raise VerifyException(f"row {j} reads bit {i}; the operands have "
                                                  f"{plural(n_in, 'bit')}")
                        if i in seen:
                            raise VerifyException(f"row {j} reads bit {i} twice")
                        seen.add(i)
                part.gadget()  # range check

    def row_list(self) -> list[Row]:
        cached = getattr(self, "_rows_cache", None)
        rows_attr = self.rows
        if cached is None or cached[0] is not rows_attr:
            cached = (rows_attr, [r.row() for r in rows_attr.data])
            object.__setattr__(self, "_rows_cache", cached)
        return cached[1]

    def distinct_parts(self) -> list[ThresholdRow]:
        """The threshold parts of all rows, each once (first use first): equal
        parts share their neurons, so a counter's output bits pay for each
        `[D ≥ k]` once and a full adder's sum and carry share their ANDs."""
        return list(dict.fromkeys(part for row in self.row_list() for _, part in row.parts))

    def read_bits(self) -> list[int]:
        """The bits of the concatenated operands some row reads (a view of a
        wide value may pass bits no row looks at: they are not read here)."""
        return sorted({i for row in self.row_list() for i, _ in row.terms})

    @property
    def group_index(self) -> int | None:
        """The op's group (`group 3`): its bits are zero unless bit 3 of the
        program's `groups` input is set (groups are mutually exclusive, so
        their bits may share coordinates)."""
        return None if self.group is None else self.group.value.data

    def needs_group_constant(self) -> bool:
        """A grouped op whose rows have a constant term takes it from a neuron
        of its own (gated like the others) instead of the constant neuron."""
        return self.group is not None and any(
            part.gadget().base for row in self.row_list() for _, part in row.parts)

    def gadget_neuron_count(self) -> int:
        """Neurons of the rows' gadgets alone (shared parts counted once), and
        a grouped op's constant neuron. Kept while the rows and the group
        stay the same attributes: the scheduler and codegen ask many times."""
        cached = getattr(self, "_neurons_cache", None)
        key = (self.rows, self.group)
        if cached is None or cached[0] is not key[0] or cached[1] is not key[1]:
            count = sum(part.gadget().count for part in self.distinct_parts()) + \
                int(self.needs_group_constant())
            cached = (*key, count)
            object.__setattr__(self, "_neurons_cache", cached)
        return cached[2]

    def overwritten_coords(self) -> list[int]:
        """Output coordinates that hold a dead bit when this op writes them."""
        return coords_prop(self, "overwrites") or []

    def neuron_count(self) -> int:
        """Gadget neurons plus one copy neuron per overwritten coordinate."""
        return self.gadget_neuron_count() + len(self.overwritten_coords())

    def verify_(self) -> None:
        n_in = sum(width_of(v) for v in self.inputs)
        rows = self.row_list()
        if len(rows) != width_of(self.result):
            raise VerifyException(f"tensor.threshold has {plural(len(rows), 'row')} for "
                                  f"{plural(width_of(self.result), 'output bit')}")
        checked = (self.rows, n_in)
        if getattr(self, "_rows_checked", None) != checked:   # rows unchanged: checked before
            self._verify_rows(rows, n_in)
            object.__setattr__(self, "_rows_checked", checked)
        self._verify_half("mlp")
        if self.head is not None:
            raise VerifyException("tensor.threshold runs in an MLP half: no head")
        if self.neurons is not None:
            lo, hi = self.neurons.get_values()
            if hi - lo != self.neuron_count():
                raise VerifyException(f"tensor.threshold needs {self.neuron_count()} neurons, "
                                      f"placed on [{lo}, {hi})")
        _check_coords(self, width_of(self.result))
        over = self.overwritten_coords()
        if over and not set(over) <= set(coords_prop(self) or []):
            raise VerifyException("tensor.threshold overwrites coordinates that are not among "
                                  "its output coordinates")


@irdl_op_definition
class MemoryOp(PlacedOp):
    """A key–value memory: one Gated DeltaNet head of one layer, `slots` rows of
    `width` bits (≤ 64), every row empty (all-zero bits) at the start:

        tensor.memory @regs slots 16 width 64
        tensor.memory @regs slots 16 width 64 at layer 1 attn head 0     (scheduled)
    """

    name = "tensor.memory"
    sym_name = prop_def(SymbolNameConstraint())
    slots = prop_def(IntegerAttr[I64])
    width = prop_def(IntegerAttr[I64])
    head = opt_prop_def(IntegerAttr[I64])
    neurons = opt_prop_def(DenseArrayBase.constr(i64))
    coords = opt_prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(SymbolOpInterface())
    custom_directives = (Placement,)
    assembly_format = (
        "$sym_name `slots` $slots `width` $width "
        "(`at` custom<Placement>($layer, $half, $head, $neurons, $coords)^)? attr-dict")

    def __init__(self, name: str, slots: int, width: int):
        super().__init__(properties={"sym_name": StringAttr(name), "slots": i64_attr(slots),
                                     "width": i64_attr(width)})

    @property
    def memory_name(self) -> str:
        return self.sym_name.data

    @property
    def n_slots(self) -> int:
        return self.slots.value.data

    @property
    def n_width(self) -> int:
        return self.width.value.data

    def key_width(self, kind: str) -> int:
        return self.n_slots if kind == "onehot" else max(1, (self.n_slots - 1).bit_length())

    def verify_(self) -> None:
        if not 1 <= self.n_slots <= MAX_MEMORY_SLOTS:
            raise VerifyException(f"memory @{self.memory_name} has {self.n_slots} slots; a head "
                                  f"holds 1 to {MAX_MEMORY_SLOTS}")
        if not 1 <= self.n_width <= MAX_MEMORY_WIDTH:
            raise VerifyException(f"memory @{self.memory_name} rows of {self.n_width} bits; a "
                                  f"head row holds 1 to {MAX_MEMORY_WIDTH}")
        self._verify_half("attn")
        if (self.layer is None) != (self.head is None):
            raise VerifyException(f"memory @{self.memory_name}: a placement names the head")
        if self.neurons is not None or self.coords is not None:
            raise VerifyException(f"memory @{self.memory_name} owns no neurons or coordinates")


class _KvOp(PlacedOp):
    memory = prop_def(SymbolRefAttr)
    key_kind = prop_def(StringAttr)
    head = opt_prop_def(IntegerAttr[I64])
    neurons = opt_prop_def(DenseArrayBase.constr(i64))
    coords = opt_prop_def(DenseArrayBase.constr(i64))

    @property
    def memory_name(self) -> str:
        return self.memory.root_reference.data

    def memory_op(self) -> MemoryOp:
        program = self.parent_op()
        assert program is not None and program.name == "tensor.program"  # a ProgramOp
        mem = program.memory_named(self.memory_name)  # type: ignore[attr-defined]
        if mem is None:
            raise VerifyException(f"{self.name}: no tensor.memory @{self.memory_name} in "
                                  "the program")
        return mem

    def _verify_access(self, key: SSAValue, enable: SSAValue | None) -> MemoryOp:
        kind = self.key_kind.data
        if kind not in KEY_KINDS:
            raise VerifyException(f"{self.name}: key kind '{kind}' (expected onehot or binary)")
        mem = self.memory_op()
        want = mem.key_width(kind)
        if width_of(key) != want:
            raise VerifyException(f"{self.name}: a {kind} key of memory @{mem.memory_name} "
                                  f"({mem.n_slots} slots) has {plural(want, 'bit')}, got "
                                  f"{width_of(key)}")
        if enable is not None and width_of(enable) != 1:
            raise VerifyException(f"{self.name}: the enable is one bit")
        self._verify_half("attn")
        if self.neurons is not None:
            raise VerifyException(f"{self.name} owns no neurons")
        return mem


@irdl_op_definition
class KvWriteOp(_KvOp):
    """Write a memory row: `tensor.kv_write @m[binary %addr], %v if %en : !tensor.bits<4>,
    !tensor.bits<8>, !tensor.bits<1>`.

    The key is `binary` (an address) or `onehot` (one bit per slot; all zero
    writes nothing, two or more ones are undefined). An address ≥ slots, or a
    cleared enable bit, writes nothing."""

    name = "tensor.kv_write"
    key = operand_def(BitsType)
    value = operand_def(BitsType)
    enable = opt_operand_def(BitsType)
    custom_directives = (Keyword, Placement)
    assembly_format = (
        "$memory `[` custom<Keyword>($key_kind) $key `]` `,` $value (`if` $enable^)? "
        "(`at` custom<Placement>($layer, $half, $head, $neurons, $coords)^)? "
        "attr-dict `:` type($key) `,` type($value) (`,` type($enable)^)?")

    def __init__(self, memory: str, kind: str, key: SSAValue, value: SSAValue,
                 enable: SSAValue | None = None):
        super().__init__(operands=[key, value, [enable] if enable is not None else []],
                         properties={"memory": SymbolRefAttr(memory),
                                     "key_kind": StringAttr(kind)})

    def verify_(self) -> None:
        mem = self._verify_access(self.key, self.enable)
        if width_of(self.value) != mem.n_width:
            raise VerifyException(f"tensor.kv_write of {plural(width_of(self.value), 'bit')} "
                                  f"into rows of {mem.n_width} (memory @{mem.memory_name})")
        if self.coords is not None:
            raise VerifyException("tensor.kv_write produces no coordinates")


@irdl_op_definition
class KvReadOp(_KvOp):
    """Read a memory row: `%v = tensor.kv_read @m[onehot %q] : !tensor.bits<16> ->
    !tensor.bits<8>`. Sees the write of the same token. An empty slot, an
    address ≥ slots, an all-zero one-hot query or a cleared enable bit read as
    zero bits, and so does a grouped read while its group does not run.
    Scheduled, `coords` are the result's coordinates; they hold −1 (bit 0)
    when the token enters the layer."""

    name = "tensor.kv_read"
    key = operand_def(BitsType)
    enable = opt_operand_def(BitsType)
    group = opt_prop_def(IntegerAttr[I64])
    result = result_def(BitsType)
    custom_directives = (Keyword, Placement)
    assembly_format = (
        "$memory `[` custom<Keyword>($key_kind) $key `]` (`if` $enable^)? (`group` $group^)? "
        "(`at` custom<Placement>($layer, $half, $head, $neurons, $coords)^)? "
        "attr-dict `:` type($key) (`,` type($enable)^)? `->` type($result)")

    @property
    def group_index(self) -> int | None:
        """The read's group (`group 3`): it reads only while bit 3 of the
        program's `groups` input is set, zero bits otherwise."""
        return None if self.group is None else self.group.value.data

    def __init__(self, memory: str, kind: str, key: SSAValue, width: int,
                 enable: SSAValue | None = None):
        super().__init__(operands=[key, [enable] if enable is not None else []],
                         properties={"memory": SymbolRefAttr(memory),
                                     "key_kind": StringAttr(kind)},
                         result_types=[bits(width)])

    def verify_(self) -> None:
        mem = self._verify_access(self.key, self.enable)
        if width_of(self.result) != mem.n_width:
            raise VerifyException(f"tensor.kv_read gives rows of {mem.n_width} bits "
                                  f"(memory @{mem.memory_name}), not "
                                  f"{width_of(self.result)}")
        _check_coords(self, width_of(self.result))


@irdl_op_definition
class PadOp(TensorOp):
    """A constant pad coordinate: never read or written, it keeps every token's
    `sum(h²)` at `64·hidden` so that each RMSNorm scales by exactly 1/8.
    `tensor.pad 700 = 255` holds 255 throughout. Added by the scheduler."""

    name = "tensor.pad"
    coord = prop_def(IntegerAttr[I64])
    value = prop_def(IntegerAttr[I64])
    assembly_format = "$coord `=` $value attr-dict"

    def __init__(self, coord: int, value: int):
        super().__init__(properties={"coord": i64_attr(coord), "value": i64_attr(value)})

    def verify_(self) -> None:
        if not 0 <= self.value.value.data <= MAX_ACTIVE_GATE:
            raise VerifyException(f"tensor.pad value {self.value.value.data} is outside "
                                  f"[0, {MAX_ACTIVE_GATE}] (exact in bfloat16)")


@irdl_op_definition
class ClearOp(PlacedOp):
    """Reset coordinates whose bits are dead to −1 (bit 0), so that a later
    bit (a threshold output or a kv_read, which writes onto −1) may take them:
    `tensor.clear at layer 3 mlp neurons [40, 42) coords [7, 9)`. One neuron
    per coordinate, G = b_old (0 or 1, exact) and down −2. A grouped clear
    (`tensor.clear group 2 at ...`) fires only while its group runs; an
    ungrouped one clears whatever dead bit any group left there. Added by the
    scheduler; the ideal semantics are unchanged (the engines hold values, not
    coordinates)."""

    name = "tensor.clear"
    neurons = opt_prop_def(DenseArrayBase.constr(i64))
    coords = prop_def(DenseArrayBase.constr(i64))
    head = opt_prop_def(IntegerAttr[I64])
    group = opt_prop_def(IntegerAttr[I64])
    custom_directives = (Placement,)
    assembly_format = ("(`group` $group^)? `at` custom<Placement>($layer, $half, $head, "
                       "$neurons, $coords) attr-dict")

    def __init__(self, layer: int, coords: Sequence[int], group: int | None = None):
        props: dict[str, Attribute] = {"coords": i64_array(ranges_of(sorted(coords)))}
        if group is not None:
            props["group"] = i64_attr(group)
        super().__init__(properties=props)
        self.place(layer, "mlp")

    @property
    def group_index(self) -> int | None:
        return None if self.group is None else self.group.value.data

    def cleared_coords(self) -> list[int]:
        return coords_prop(self) or []

    def neuron_count(self) -> int:
        return len(self.cleared_coords())

    def unplace(self) -> None:  # made by the scheduler: it is erased, not unplaced
        raise VerifyException("tensor.clear belongs to its schedule")

    def verify_(self) -> None:
        self._verify_half("mlp")
        if self.layer is None:
            raise VerifyException("tensor.clear is placed in an MLP half (`at layer L mlp`)")
        if self.head is not None:
            raise VerifyException("tensor.clear runs in an MLP half: no head")
        if self.neurons is not None:
            lo, hi = self.neurons.get_values()
            if hi - lo != self.neuron_count():
                raise VerifyException(f"tensor.clear needs {self.neuron_count()} neurons, "
                                      f"placed on [{lo}, {hi})")


def half_index(op: Operation) -> int:
    """Halves in order: attn 0 → 0, mlp 0 → 1, attn 1 → 2, ..."""
    assert isinstance(op, PlacedOp) and op.placed_layer is not None
    return 2 * op.placed_layer + (op.placed_half == "mlp")
