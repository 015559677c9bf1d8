"""Kernel parameters: pointers (and their element width) or scalars, the words
they take in the parameter area, and the `.shared` variables."""

from __future__ import annotations

from qgc.dialects import ptx, simt
from qgc.passes.ptx_to_simt.common import WIDE, unsupported


class KernelParameters:
    """The kernel's parameters and `.shared` variables: their machine types and words."""

    def _shared_var(self, op: ptx.VarOp) -> None:
        """Declare a `.shared` variable; `simt-layout-memory` places it."""
        name = op.sym_name.data
        align = max(4, op.align.value.data if op.align is not None else 4)
        self.shared[name] = (name, 0 if op.elements == 0 else op.size_bytes, align)

    def _local_var(self, op: ptx.VarOp) -> None:
        """Place a `.local` variable in each thread's frame. One only (nvcc's
        and clang's `__local_depot`): `ref` checks each variable's own bounds,
        the machine the frame's."""
        if self.locals:
            raise unsupported(op, f".local {op.sym_name.data}", "a second .local variable")
        self.locals[op.sym_name.data] = 0
        self.local_bytes = op.size_bytes

    def _classify_params(self, insts: list[ptx.InstOp]) -> None:
        """A 64-bit parameter is a pointer when its value is converted by
        `cvta` or used as an address, else a 64-bit scalar; a pointer's
        buffer is word-addressed unless every access is 1 byte wide, or every
        one 2 (then one element per word: `ptr8`, `ptr16`); a word buffer
        also accessed in bytes or halfwords holds them packed, as they lie in
        memory (those accesses are located: `MemoryAccesses.located`)."""
        wide = {name: i for i, (name, t) in enumerate(self.params) if t == "ptr"}
        pointers, sizes = _pointer_uses(insts, wide)
        for name, i in wide.items():
            if i not in pointers and self._loaded(insts, name):
                self.params[i] = (name, "u64")
                continue
            widths = sizes.get(i, {})
            unit = min(widths, default=4) if len(widths) == 1 or not set(widths) - {4, 8} else 4
            self.params[i] = (name, {1: "ptr8", 2: "ptr16"}.get(unit, "ptr"))
        self.units = {i: simt.POINTER_TYPES[t] for i, (_, t) in enumerate(self.params)
                      if t in simt.POINTER_TYPES}
        wide_scalars = [i for i, (_, t) in enumerate(self.params) if t in simt.WIDE_SCALARS]
        first = len(self.params) + 2 * len(self.units)
        self.high_words = {i: first + k for k, i in enumerate(wide_scalars)}
        first += len(wide_scalars)
        self.ref_words = {i: first + k for k, i in enumerate(self.units)}

    @staticmethod
    def _loaded(insts: list[ptx.InstOp], name: str) -> bool:
        return any(inst.op.base == "ld" and any(
            isinstance(a, ptx.Addr) and isinstance(a.base, ptx.Sym) and a.base.name == name
            for a in inst.operands_decoded) for inst in insts)

    def _param(self, op: ptx.ParamOp) -> None:
        name, ptype = op.param_name.data, op.type.data
        if op.ret is not None:
            return
        bits = ptx.TYPE_BITS.get(ptype, 0)
        if op.count is not None:
            raise unsupported(op, f".param .{ptype} {name}[{op.count.value.data}]",
                              "an aggregate parameter")
        if bits == 64 and ptype[0] != "f":
            mtype = "ptr"
        elif bits in (8, 16, 32) and ptype not in ("f16", "bf16"):
            mtype = ptype
        else:
            raise unsupported(op, f".param .{ptype}", f"parameter '{name}'")
        self.param_index[name] = len(self.params)
        self.params.append((name, mtype))


def _pointer_uses(insts: list[ptx.InstOp], params: dict[str, int]
                  ) -> tuple[set[int], dict[int, dict[int, ptx.InstOp]]]:
    """Which 64-bit parameters are pointers (converted by `cvta`, or
    reaching an address or a stored value and never used as an integer), and
    the access sizes in bytes through each (with the first access of each size): a flow-insensitive
    fixpoint over copies (`mov`, `cvta`) and pointer arithmetic (`add`, `sub`)."""
    copy_of: dict[str, set[int]] = {}    # register -> parameters it is a copy of
    into: dict[str, set[int]] = {}       # register -> parameters it may point into
    changed = True
    while changed:
        changed = False
        for inst in insts:
            args = inst.operands_decoded
            if not args or not isinstance(args[0], ptx.Reg):
                continue
            base, d = inst.op.base, args[0].name
            srcs = [a.name for a in args[1:] if isinstance(a, ptx.Reg)]
            if base == "ld" and "param" in inst.op.modifiers and isinstance(args[1], ptx.Addr) \
                    and isinstance(args[1].base, ptx.Sym) and args[1].base.name in params:
                copies = points = {params[args[1].base.name]}
            elif base in ("mov", "cvta") and len(srcs) == 1:
                copies, points = copy_of.get(srcs[0], set()), into.get(srcs[0], set())
            elif base in ("add", "sub") and inst.op.type in WIDE:
                copies, points = set(), set().union(*(into.get(r, set()) for r in srcs))
            else:
                continue
            for table, new in ((copy_of, copies), (into, points)):
                if not new <= table.get(d, set()):
                    table[d] = table.get(d, set()) | new
                    changed = True
    converted: set[int] = set()     # copied into cvta: pointers for sure
    addressing: set[int] = set()    # reaching an address
    counted: set[int] = set()       # used as an integer (compared, scaled, subtracted)
    stored: set[int] = set()        # stored to memory after pointer arithmetic or as is
    sizes: dict[int, dict[int, ptx.InstOp]] = {}
    for inst in insts:
        args, base = inst.operands_decoded, inst.op.base
        regs = [a.name for a in args[1:] if isinstance(a, ptx.Reg)]
        if base == "cvta" and len(regs) == 1:
            converted |= copy_of.get(regs[0], set())
        elif base in ("ld", "st", "atom", "red") and "param" not in inst.op.modifiers:
            addr = next((a for a in args if isinstance(a, ptx.Addr)), None)
            if addr is None or not isinstance(addr.base, ptx.Reg):
                continue
            addressing |= into.get(addr.base.name, set())
            if base != "ld":        # a pointer stored as a value escapes to memory
                stored.update(*(into.get(a.name, set()) for a in args
                                if isinstance(a, ptx.Reg)))
            width = ptx.TYPE_BITS.get(inst.op.type or "", 32) // 8
            for i in into.get(addr.base.name, set()):
                sizes.setdefault(i, {}).setdefault(width, inst)
        elif base not in ("mov", "add", "ld"):
            counted.update(*(into.get(r, set()) for r in regs[1 if base == "sub" else 0:]))
    pointers = converted | ((addressing | stored) - counted)
    return pointers, {i: w for i, w in sizes.items() if i in pointers}
