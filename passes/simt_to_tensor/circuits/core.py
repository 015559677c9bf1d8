"""The plumbing every circuit family builds on (`AluCore`).

A value's bits as Forms (through slices, concats and constant rows), rows
emitted as one `tensor.threshold` (constant rows and copies of one bit as
views, the same rows over the same operands built once), and `_attempt`,
which undoes a construction whose row breaks the gadget bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction

from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from qgc.dialects import tensor as T
from qgc.passes.simt_to_tensor.circuits.forms import (
    Form,
    Key,
    Part,
    Row,
    Sum,
    checked_row,
    constant_of,
)
from qgc.passes.simt_to_tensor.circuits.templates import (
    Template,
    Templates,
    is_closed,
    renaming,
    shape_of,
)


class AluCore:
    """Builds rows over Forms into a `ProgramBuilder`: the state and the
    plumbing of `Alu`, whose circuit families derive from it."""

    def __init__(self, builder: T.ProgramBuilder, templates: Templates | None = None):
        self.b = builder
        self._cache: dict[SSAValue, list[Form]] = {}
        self._built: dict[tuple, SSAValue] = {}
        self.templates: Templates = templates if templates is not None else {}

    def bits(self, value: SSAValue) -> list[Form]:
        """The Forms of a value's bits, through slices/concats, constants folded."""
        cached = self._cache.get(value)
        if cached is not None:
            return cached
        op = value.owner
        if isinstance(op, T.SliceOp):
            out = self.bits(op.input)[op.lo.value.data:op.hi.value.data]
        elif isinstance(op, T.ConcatOp):
            out = [f for v in op.inputs for f in self.bits(v)]
        elif isinstance(op, T.ThresholdOp):
            out = []
            for j, row in enumerate(op.row_list()):
                if row.terms:
                    out.append(Form.bit(value, j))
                else:
                    out.append(Form(const=row.value([])))
        else:
            out = [Form.bit(value, i) for i in range(T.width_of(value))]
        self._cache[value] = out
        return out

    def emit(self, rows: Sequence[Row | Sum]) -> SSAValue:
        """One `tensor.threshold` for the rows ([form ≥ t] or a `Sum`); constant
        rows and copies of one bit become views. Raises VerifyException for a
        row the gadget bounds reject."""
        kinds: list[tuple[str, object]] = []
        real: list[Row | list[Part]] = []
        consts: list[int] = []
        for row in rows:
            folded = self._fold_row(row)
            if isinstance(folded, int):
                kinds.append(("const", len(consts)))
                consts.append(folded)
            elif isinstance(folded, tuple) and (copy := self._copy_of(*folded)) is not None:
                kinds.append(("copy", copy))
            else:
                kinds.append(("row", len(real)))
                real.append(folded)
        parts: list[tuple[SSAValue, int]] = []
        if real:
            operands: list[SSAValue] = []
            offset: dict[SSAValue, int] = {}
            forms = [f for r in real for f in ([r[0]] if isinstance(r, tuple) else
                                               [p[1] for p in r])]
            for form in forms:
                for v, _i in form.terms:
                    if v not in offset:
                        offset[v] = sum(T.width_of(o) for o in operands)
                        operands.append(v)

            def spec(form: Form, t: int | Fraction) -> tuple[dict[int, int], Fraction]:
                return ({offset[v] + i: w for (v, i), w in form.terms.items()},
                        Fraction(t) - form.const)

            specs = [spec(*r) if isinstance(r, tuple) else [(c, *spec(f, t)) for c, f, t in r]
                     for r in real]
            rv = self._threshold(operands, specs)
        if consts:
            cv = self.b.threshold([], [({}, 0 if c else 1) for c in consts])
        for kind, what in kinds:
            if kind == "row":
                parts.append((rv, what))
            elif kind == "const":
                parts.append((cv, what))
            else:
                parts.append(what)
        return self._view(parts)

    def _threshold(self, operands: list[SSAValue], specs: list) -> SSAValue:
        """A `tensor.threshold`, or the one already built for the same rows over
        the same operands (lanes computing on uniform values share it)."""
        return self._rows_over(operands, tuple(T.row_attrs(specs)))

    def _rows_over(self, operands: list[SSAValue], rows: tuple) -> SSAValue:
        key = (tuple(operands), rows)
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = self.b.threshold_rows(operands, rows)
        return built

    def instantiated(self, key: Hashable, inputs: Sequence[SSAValue],
                     build: Callable[[], SSAValue]) -> SSAValue:
        """`build()`'s value, its ops cloned from the template of `key` for
        inputs of this shape when there is one (`templates`); otherwise built,
        and kept as the template when the build is closed."""
        got = shape_of(self.bits, inputs)
        if got is None or self._in_side_tables(inputs):
            return build()
        shape, holders = got
        template = self.templates.get((key, shape))
        if template is not None:
            mapping = renaming(template, inputs, holders)
            if mapping is not None:
                return self._instantiate(template, mapping)
            return build()
        block, sizes = self.b.block, self._side_table_sizes()
        mark = block.last_op
        result = build()
        ops = []
        op = block.last_op
        while op is not mark:
            assert op is not None
            ops.append(op)
            op = op.prev_op
        ops.reverse()
        if (sizes == self._side_table_sizes() and all(map(_clonable, ops))
                and is_closed(ops, result, inputs, holders)):
            self.templates[(key, shape)] = Template(tuple(inputs), tuple(holders), tuple(ops),
                                                    result)
        return result

    def _instantiate(self, template: Template, mapping: dict[SSAValue, SSAValue]) -> SSAValue:
        values = dict(mapping)
        for op in template.ops:
            ins = [values.get(v, v) for v in op.operands]
            if isinstance(op, T.SliceOp):
                new = self.b.slice(ins[0], op.lo.value.data, op.hi.value.data)
            elif isinstance(op, T.ConcatOp):
                new = self.b.concat(ins)
            elif ins:
                new = self._rows_over(ins, tuple(op.rows.data))
            else:   # constants are not shared (`emit`, `const`)
                new = self.b.threshold_rows([], tuple(op.rows.data))
            values[op.results[0]] = new
        return values.get(template.result, template.result)

    def _side_tables(self) -> list[dict]:
        """Tables a build may leave values in for a later one (a template
        cannot replay them); families that keep such tables add theirs."""
        return []

    def _side_table_sizes(self) -> tuple[int, ...]:
        return tuple(len(t) for t in self._side_tables())

    def _in_side_tables(self, inputs: Sequence[SSAValue]) -> bool:
        """Whether a side table holds something made of these inputs (a build
        would take it from there)."""
        ins = set(inputs)
        return any(v in ins for t in self._side_tables() for k in t for v in k
                   if isinstance(v, SSAValue))

    @staticmethod
    def _copy_of(form: Form, t: int | Fraction) -> Key | None:
        """The bit a one-term row [w·x + k ≥ t] merely copies, if it does."""
        if len(form.terms) != 1:
            return None
        (key, w), = form.terms.items()
        return key if w > 0 and 0 < t - form.const <= w else None

    @staticmethod
    def _fold_row(row: Row | Sum) -> int | Row | list[Part]:
        """A constant (0/1), a plain row, or the real parts of a sum row (its
        constant as a [0 ≥ 0] part); checks every real part's gadget, and
        tightens a part that breaks the bounds (`tighten`)."""
        if not isinstance(row, Sum):
            value = constant_of(*row)
            if value is not None:
                return value
            return checked_row(*row)
        const, real = 0, []
        for c, form, t in row.parts:
            value = constant_of(form, t)
            if value is not None:
                const += c * value
            else:
                real.append((c, *checked_row(form, t)))
        if not real:
            if const not in (0, 1):
                raise ValueError(f"a sum row folds to the constant {const}, not a bit")
            return const
        if len(real) == 1 and real[0][0] == 1 and const == 0:
            return real[0][1], real[0][2]
        if const:
            real.append((const, Form(), 0))
        return real

    def _view(self, parts: list[tuple[SSAValue, int]]) -> SSAValue:
        """Concatenation of single bits, grouped into runs of slices."""
        runs: list[list] = []
        for v, i in parts:
            if runs and runs[-1][0] is v and runs[-1][2] == i:
                runs[-1][2] = i + 1
            else:
                runs.append([v, i, i + 1])
        pieces = []
        for v, lo, hi in runs:
            pieces.append(v if (lo == 0 and hi == T.width_of(v)) else self.b.slice(v, lo, hi))
        return pieces[0] if len(pieces) == 1 else self.b.concat(pieces)

    def value(self, forms: Sequence[Form]) -> SSAValue:
        """An SSA value whose bits are the given 0/1 Forms."""
        return self.emit([(f, 1) for f in forms])

    def materialize(self, forms: Sequence[Form]) -> list[Form]:
        """Forms → real bits (copy rows for composite ones, one layer)."""
        idx = [i for i, f in enumerate(forms) if not (f.is_const or f.is_real)]
        if not idx:
            return list(forms)
        v = self.value([forms[i] for i in idx])
        got = self.bits(v)
        out = list(forms)
        for j, i in enumerate(idx):
            out[i] = got[j]
        return out

    def _attempt(self, first: Callable[[], SSAValue],
                 fallback: Callable[[], SSAValue]) -> SSAValue:
        """Run `first`; if one of its rows breaks the gadget bounds, undo its ops
        and run `fallback`."""
        block = self.b.block
        mark = block.last_op
        try:
            return first()
        except VerifyException:
            while block.last_op is not mark:
                op = block.last_op
                assert op is not None
                for r in op.results:
                    self._cache.pop(r, None)
                self._built = {k: v for k, v in self._built.items() if v.owner is not op}
                op.detach()
                op.erase()
            return fallback()

    @staticmethod
    def _same(x: SSAValue, y: SSAValue) -> int:
        w = T.width_of(x)
        if T.width_of(y) != w:
            raise ValueError(f"operand widths differ: {w} and {T.width_of(y)}")
        return w

    def const(self, value: int, width: int) -> SSAValue:
        """Constant bits of `value` mod 2^width: rows without terms, 0 neurons."""
        return self.b.threshold([], [({}, 0 if (value >> i) & 1 else 1) for i in range(width)])


def _clonable(op: Operation) -> bool:
    return isinstance(op, T.ThresholdOp | T.SliceOp | T.ConcatOp)
