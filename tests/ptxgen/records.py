"""The generator's records (registers, immediates, instructions, labels) and
`Kernel`, which allocates registers and labels and prints the records as PTX."""

from __future__ import annotations

from dataclasses import dataclass

from ptxgen.values import from_raw

KERNEL_NAME = "gen"
MAX_THREADS = 16
STEP_LIMIT = 20_000  # instructions per thread: a generator bug, never a real program

# ===================================================================== records


@dataclass(frozen=True)
class Reg:
    name: str
    kind: str  # "pred" | "b32" | "b64" | "f32" | "f64"


@dataclass(frozen=True)
class Imm:
    """An integer immediate; `value` is already wrapped to the width it is used at."""
    value: int
    text: str


@dataclass(frozen=True)
class FImm:
    """An f32 immediate, printed in PTX hex form 0fXXXXXXXX."""
    bits: int


@dataclass(frozen=True)
class DImm:
    """An f64 immediate (a double literal), printed 0dXXXXXXXXXXXXXXXX."""
    bits: int


@dataclass(frozen=True)
class Special:
    name: str  # %tid.x, %ntid.x, %ctaid.x


@dataclass(frozen=True)
class Sym:
    name: str  # a kernel parameter or a .shared variable


@dataclass(frozen=True)
class Mem:
    base: Reg | Sym
    offset: int = 0


@dataclass(frozen=True)
class Label:
    name: str


Operand = Reg | Imm | FImm | DImm | Special | Sym | Mem | Label


@dataclass(frozen=True)
class Inst:
    """`op.mods.types args` with an optional guard (`@%p` / `@!%p`, branches only).

    args are in PTX order; every op except st/bar/bra/ret has its destination first.
    """
    op: str
    mods: tuple[str, ...]
    types: tuple[str, ...]
    args: tuple[Operand, ...]
    guard: Reg | None = None
    negate: bool = False

    @property
    def opcode(self) -> str:
        return ".".join((self.op, *self.mods, *self.types))


def _operand_text(x: Operand) -> str:
    if isinstance(x, Reg | Special | Sym | Label):
        return x.name
    if isinstance(x, Imm):
        return x.text
    if isinstance(x, FImm):
        return f"0f{x.bits:08X}"
    if isinstance(x, DImm):
        return f"0d{x.bits:016X}"
    assert isinstance(x, Mem)
    return f"[{x.base.name}{f'+{x.offset}' if x.offset else ''}]"


def _inst_text(x: Inst) -> str:
    guard = f"@{'!' if x.negate else ''}{x.guard.name} " if x.guard else ""
    args = ", ".join(_operand_text(a) for a in x.args)
    return f"\t{guard}{x.opcode}" + (f" \t{args};" if args else ";")


# ================================================================ the kernel

LOCAL_DEPOT = "__local_depot0"
_REG_PREFIX = {"pred": "%p", "f32": "%f", "b32": "%r", "b64": "%rd", "f64": "%fd"}
ELEM_BYTES = {"u8": 1, "u16": 2, "u32": 4, "s32": 4, "b32": 4, "f32": 4, "u64": 8, "s64": 8,
              "b64": 8}


class Kernel:
    """One `.entry`, its launch, and a tiny register and label allocator."""

    def __init__(self, grid: int, block: int):
        self.grid, self.block = grid, block
        self.params: list[tuple[str, str]] = []  # (name, PTX type)
        self.args: list[dict] = []  # launch arguments, in parameter order
        self.code: list[Inst | Label] = []
        self.shared: list[tuple[str, str, int, bool]] = []  # name, type, count, module scope
        self.local_bytes = 0  # each thread's .local frame (LOCAL_DEPOT), nvcc-style
        self._regs = dict.fromkeys(_REG_PREFIX, 0)
        self._labels = 0

    @property
    def threads(self) -> int:
        return self.grid * self.block

    def reg(self, kind: str) -> Reg:
        self._regs[kind] += 1
        return Reg(f"{_REG_PREFIX[kind]}{self._regs[kind]}", kind)

    def label(self) -> Label:
        self._labels += 1
        return Label(f"$L__BB0_{self._labels}")

    def emit(self, op: str, mods: str | tuple = (), types: str | tuple = (), *args: Operand,
             guard: Reg | None = None, negate: bool = False) -> None:
        mods = (mods,) if isinstance(mods, str) else tuple(mods)
        types = (types,) if isinstance(types, str) else tuple(types)
        self.code.append(Inst(op, mods, types, args, guard, negate))

    def place(self, label: Label) -> None:
        self.code.append(label)

    def _param(self, ptx_type: str, arg: dict) -> Sym:
        name = f"{KERNEL_NAME}_param_{len(self.params)}"
        self.params.append((name, ptx_type))
        self.args.append(arg)
        return Sym(name)

    def pointer(self, ty: str, raw: list[int]) -> Reg:
        """A `ty*` parameter holding `raw` (bit patterns): its global address, nvcc-style."""
        sym = self._param("u64", {"type": f"{ty}*", "data": [from_raw(ty, v) for v in raw]})
        generic, glob = self.reg("b64"), self.reg("b64")
        self.emit("ld", "param", "u64", generic, Mem(sym))
        self.emit("cvta", ("to", "global"), "u64", glob, generic)
        return glob

    def scalar(self, ty: str, raw: int) -> Reg:
        sym = self._param("u32", {"type": ty, "value": from_raw(ty, raw)})
        r = self.reg("b32")
        self.emit("ld", "param", "u32", r, Mem(sym))
        return r

    def shared_array(self, words: int, module_scope: bool, typed: bool) -> Sym:
        name = f"{KERNEL_NAME}_smem{len(self.shared)}"
        if typed:
            self.shared.append((name, "u32", words, module_scope))
        else:
            self.shared.append((name, "b8", 4 * words, module_scope))
        return Sym(name)

    def local_frame(self, words: int) -> Sym:
        """The thread's `.local` depot of `words` words (a per-thread array)."""
        self.local_bytes = 4 * words
        return Sym(LOCAL_DEPOT)

    def launch(self) -> dict:
        return {"kernel": KERNEL_NAME, "grid": [self.grid, 1, 1], "block": [self.block, 1, 1],
                "args": [dict(a, data=list(a["data"])) if "data" in a else dict(a)
                         for a in self.args]}

    def ptx(self) -> str:
        def shared_decl(name: str, ty: str, count: int) -> str:
            return f".shared .align 4 .{ty} {name}[{count}];"

        lines = ["//", "// Generated by tests/ptxgen (hypothesis)", "//", "",
                 ".version 8.5", ".target sm_75", ".address_size 64", ""]
        for name, ty, count, module_scope in self.shared:
            if module_scope:
                lines.append(shared_decl(name, ty, count))
        lines += [f"\t// .globl\t{KERNEL_NAME}", "", f".visible .entry {KERNEL_NAME}("]
        lines.append(",\n".join(f"\t.param .{ty} {name}" for name, ty in self.params))
        lines += [")", "{"]
        for kind, prefix in _REG_PREFIX.items():
            if self._regs[kind]:
                lines.append(f"\t.reg .{kind} \t{prefix}<{self._regs[kind] + 1}>;")
        for name, ty, count, module_scope in self.shared:
            if not module_scope:
                lines.append("\t" + shared_decl(name, ty, count))
        if self.local_bytes:
            lines.append(f"\t.local .align 8 .b8 \t{LOCAL_DEPOT}[{self.local_bytes}];")
        lines.append("")
        for x in self.code:
            lines.append(f"{x.name}:" if isinstance(x, Label) else _inst_text(x))
        lines += ["", "}", ""]
        return "\n".join(lines)


# ====================================================== a generated program


@dataclass(frozen=True)
class GeneratedProgram:
    ptx: str
    launch: dict
    expected: list  # per argument: the final buffer, or None for a scalar
    family: str
