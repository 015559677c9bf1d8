"""Kernel parameters: pointers (and their element width) or scalars, the words
they take in the parameter area, and the `.shared` variables."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr
from qgc.machine.abi import initial_bytes
from qgc.passes.ptx_to_simt.common import WIDE, unsupported
from qgc.passes.ptx_to_simt.legalize import Wide


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

    def _module_vars(self, module: Sequence[Operation], insts: list[ptx.InstOp],
                     addresses: Callable[[], dict[str, int]]) -> None:
        """The module's `.global` and `.const` variables the kernel addresses
        through a register (`mov.u64 %rd, table`), and the `.global` ones it
        accesses directly (`ld.global.u32 %r, [count]`), in declaration order:
        each becomes a trailing pointer parameter of its name whose buffer the
        launch fills with its initial bytes (`simt.KernelOp.module_vars`;
        `addresses` gives the reference engine's address of each). A `.const`
        variable read only at fixed places stays folded into its loads."""
        variables = [op for op in module if isinstance(op, ptx.VarOp) and
                     op.space.data in ("global", "const")]
        addressed = {name for inst in insts for name in _addressed(inst)}
        variables = [var for var in variables if var.sym_name.data in addressed]
        places = addresses() if variables else {}
        for var in variables:
            name = var.sym_name.data
            if var.linkage is not None and var.linkage.data == "extern" or var.elements == 0:
                raise unsupported(var, f".{var.space.data} {name}", "a module variable this "
                                  "module does not define")
            data = initial_bytes(var)
            data += bytes(var.size_bytes - len(data))
            self.param_index[name] = len(self.params)
            self.params.append((name, "ptr"))
            self.module_data.append((name, places[name], data))

    def is_module_var(self, name: str) -> bool:
        return any(var == name for var, _, _ in self.module_data)

    def pointer_param(self, inst: ptx.InstOp, guard: GuardAttr | None, dst: str,
                       index: int) -> list[Operation]:
        """`dst` = pointer parameter `index` (a kernel's or a module
        variable's): its word in the parameter area."""
        v = self.own_vreg(dst)
        self.define_wide(inst, dst, Wide("ptr", v, prov=index, stable=self.def_count[dst] == 1))
        return [simt.LdOp(v, "param", None, index, None, guard)]

    def _classify_params(self, insts: list[ptx.InstOp]) -> None:
        """A 64-bit parameter is a pointer when its value is converted by
        `cvta` or used as an address, else a 64-bit scalar; a pointer's
        buffer is word-addressed unless every access is 1 byte wide, or every
        one 2 (then one element per word: `ptr8`, `ptr16`); a word buffer
        also accessed in bytes or halfwords holds them packed, as they lie in
        memory (those accesses are located: `MemoryAccesses.located`)."""
        wide = {name: i for i, (name, t) in enumerate(self.params) if t == "ptr"}
        modules = {name for name, _, _ in self.module_data}
        pointers, sizes = _pointer_uses(insts, wide, modules)
        for name, i in wide.items():
            if i not in pointers and name not in modules and self._loaded(insts, name):
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
        elif ptype == "f64":           # a double: its bits, as a 64-bit scalar
            mtype = "b64"
        elif bits in (8, 16, 32) and ptype not in ("f16", "bf16"):
            mtype = ptype
        else:
            raise unsupported(op, f".param .{ptype}", f"parameter '{name}'")
        self.param_index[name] = len(self.params)
        self.params.append((name, mtype))


def _addressed(inst: ptx.InstOp) -> list[str]:
    """The symbols `inst` takes the address of (`mov`, `cvta`) or accesses
    directly in the global or generic space."""
    base = inst.op.base
    out = []
    for a in inst.operands_decoded:
        if isinstance(a, ptx.Sym) and base in ("mov", "cvta"):
            out.append(a.name)
        elif isinstance(a, ptx.Addr) and isinstance(a.base, ptx.Sym) and \
                base in ("ld", "st", "atom", "red") and \
                not {"param", "const", "shared", "local"} & set(inst.op.modifiers):
            out.append(a.base.name)
    return out


def _pointer_uses(insts: list[ptx.InstOp], params: dict[str, int], modules: set[str]
                  ) -> tuple[set[int], dict[int, dict[int, ptx.InstOp]]]:
    """Which 64-bit parameters are pointers (converted by `cvta`, or
    reaching an address or a stored value and never used as an integer; a
    module variable's always), and the access sizes in bytes through each
    (with the first access of each size): a flow-insensitive fixpoint over
    copies (`mov`, `cvta`, from a parameter's load or a module variable's
    address) and pointer arithmetic (`add`, `sub`)."""
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
            elif base in ("mov", "cvta") and len(args) == 2 and isinstance(args[1], ptx.Sym) \
                    and args[1].name in modules:
                copies = points = {params[args[1].name]}
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
            if addr is not None and isinstance(addr.base, ptx.Sym) and addr.base.name in modules:
                width = ptx.TYPE_BITS.get(inst.op.type or "", 32) // 8
                sizes.setdefault(params[addr.base.name], {}).setdefault(width, inst)
                continue
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
    pointers = converted | ((addressing | stored) - counted) | {params[m] for m in modules}
    return pointers, {i: w for i, w in sizes.items() if i in pointers}
