"""`simt.kernel`, its verifier of the machine's limits, and CFG helpers over
its machine blocks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
)
from xdsl.ir import Block, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import IsolatedFromAbove, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from qgc.diagnostics import location_prefix
from qgc.dialects.simt.attributes import RegAttr, i64_attr
from qgc.dialects.simt.directives import (
    ModuleVar,
    ModuleVars,
    SharedVars,
    Signature,
    module_vars_of,
    shared_vars_of,
)
from qgc.dialects.simt.facts import (
    DEFAULT_MEM_WORDS,
    LANES,
    PARAM_TYPES,
    POINTER_TYPES,
    WIDE_SCALARS,
)
from qgc.dialects.simt.ops import TERMINATORS, BranchOp, MachineOp, MemoryOp, SharedAddrOp


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def limit_error(op: Operation, message: str) -> VerifyException:
    return VerifyException(f"{location_prefix(op)}error: {message}")


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A kernel for the machine; its region's blocks are the machine blocks,
    in order (block 0 is the entry).

        simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 [shared_words 4]
            [dynamic_shared 4] [shared_vars (tile: 16 align 4, s: extern align 4)]
            [spill_words 2] [max_blocks 32 max_ops 8] [regs 15 [spilled 3] preds 8 [demoted 2]] { ... }

    `shared_vars` declares the `.shared` variables until `simt-layout-memory`
    places them (`shared_words` static words, extern arrays from word
    `dynamic_shared`).

    `pointer_values`: the kernel holds pointers as 64-bit values (stored,
    loaded back, selected, compared with integers); each is the byte address
    the reference engine gives it, and the parameter area has one more word
    per pointer parameter (`ref_word`) to translate between the two.

    `module_vars` are the module-scope `.global` and `.const` variables the
    kernel addresses through registers (`__device__` data, a math library's
    tables, a `__constant__` array indexed at run time): each is the buffer of
    a trailing pointer parameter of its name that no launch gives; the launch
    places it from the contents it lists (`launch_params` counts the
    launch's own).

    `local_words` is the size of each thread's `.local` frame (its
    `local[...]` byte addresses), kept after its spill slots.

    `spill_words` is the number of spill slots each thread has (`spill[0]` ..),
    `spilled` the number of virtual registers that live in them; both are set
    by `simt-allocate-registers` when a kernel needs more than `regs`.
    `demoted` counts the predicates it keeps as 0/1 words where a kernel needs
    more than `preds`.
    """

    name = "simt.kernel"
    sym_name = prop_def(SymbolNameConstraint())
    param_names = prop_def(ArrayAttr[StringAttr])
    param_types = prop_def(ArrayAttr[StringAttr])
    lanes = prop_def(IntegerAttr[I64])
    mem_words = prop_def(IntegerAttr[I64])
    max_blocks = opt_prop_def(IntegerAttr[I64])
    max_ops = opt_prop_def(IntegerAttr[I64])
    regs = opt_prop_def(IntegerAttr[I64])
    preds = opt_prop_def(IntegerAttr[I64])
    shared_words = opt_prop_def(IntegerAttr[I64])
    dynamic_shared = opt_prop_def(IntegerAttr[I64])
    shared_vars = opt_prop_def(ArrayAttr)
    spill_words = opt_prop_def(IntegerAttr[I64])
    local_words = opt_prop_def(IntegerAttr[I64])
    spilled = opt_prop_def(IntegerAttr[I64])
    demoted = opt_prop_def(IntegerAttr[I64])
    pointer_values = opt_prop_def(UnitAttr)
    module_vars = opt_prop_def(ArrayAttr)
    body = region_def()
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())
    custom_directives = (Signature, SharedVars, ModuleVars)
    assembly_format = (
        "$sym_name custom<Signature>($param_names, $param_types) `lanes` $lanes "
        "`mem_words` $mem_words (`shared_words` $shared_words^)? "
        "(`dynamic_shared` $dynamic_shared^)? "
        "(`shared_vars` custom<SharedVars>($shared_vars)^)? "
        "(`module_vars` custom<ModuleVars>($module_vars)^)? "
        "(`spill_words` $spill_words^)? (`local_words` $local_words^)? "
        "(`max_blocks` $max_blocks^)? (`max_ops` $max_ops^)? "
        "(`regs` $regs^)? (`spilled` $spilled^)? (`preds` $preds^)? (`demoted` $demoted^)? "
        "(`pointer_values` $pointer_values^)? "
        "attr-dict-with-keyword $body")

    LIMIT_PROPS: ClassVar[tuple[str, ...]] = ("max_blocks", "max_ops", "regs", "preds")

    def __init__(self, name: str, params: Sequence[tuple[str, str]], blocks: list[Block],
                 mem_words: int = DEFAULT_MEM_WORDS, lanes: int = LANES):
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "param_names": ArrayAttr([StringAttr(n) for n, _ in params]),
                "param_types": ArrayAttr([StringAttr(t) for _, t in params]),
                "lanes": i64_attr(lanes), "mem_words": i64_attr(mem_words)},
            regions=[Region(blocks)])

    # ------------------------------------------------------------ accessors
    @property
    def kernel_name(self) -> str:
        return self.sym_name.data

    @property
    def params(self) -> list[tuple[str, str]]:
        return [(n.data, t.data) for n, t in zip(self.param_names.data,
                                                  self.param_types.data, strict=True)]

    def module_data(self) -> list[ModuleVar]:
        """The module variables, in the order of their (trailing) parameters."""
        return [] if self.module_vars is None else module_vars_of(self.module_vars)

    @property
    def launch_params(self) -> int:
        """The parameters a launch gives (the module variables' come after)."""
        return len(self.params) - len(self.module_data())

    def pointer_params(self) -> list[int]:
        return [i for i, (_, t) in enumerate(self.params) if t in POINTER_TYPES]

    def wide_params(self) -> list[int]:
        """The 64-bit scalar parameters (their high words follow the bounds pairs)."""
        return [i for i, (_, t) in enumerate(self.params) if t in WIDE_SCALARS]

    def bounds_word(self, param: int) -> int:
        """Word address of the bounds pair (base, size) of pointer parameter `param`."""
        return len(self.params) + 2 * self.pointer_params().index(param)

    def high_word(self, param: int) -> int:
        """Word address of the high word of 64-bit scalar parameter `param`."""
        return self._high_words_at + self.wide_params().index(param)

    def ref_word(self, param: int) -> int:
        """Word address of pointer parameter `param`'s translation word (a
        `pointer_values` kernel): the byte address of its buffer's word w is
        `unit · w + ref` (mod 2^32), `unit` the buffer's bytes per word."""
        assert self.pointer_values is not None
        return self._ref_words_at + self.pointer_params().index(param)

    @property
    def _high_words_at(self) -> int:
        return len(self.params) + 2 * len(self.pointer_params())

    @property
    def _ref_words_at(self) -> int:
        return self._high_words_at + len(self.wide_params())

    @property
    def param_area_words(self) -> int:
        refs = len(self.pointer_params()) if self.pointer_values is not None else 0
        return self._ref_words_at + refs

    def limit(self, name: str) -> int | None:
        attr = getattr(self, name)
        return None if attr is None else attr.value.data

    def set_limit(self, name: str, value: int) -> None:
        self.properties[name] = i64_attr(value)

    @property
    def shared_size(self) -> int:
        """Words of static `.shared` memory each CTA has."""
        return 0 if self.shared_words is None else self.shared_words.value.data

    def shared_window(self, dynamic_bytes: int) -> int:
        """Words of `.shared` memory per CTA for a launch with `dynamic_bytes`
        of dynamic shared memory (the extern arrays start at word
        `dynamic_shared`, after the static ones)."""
        if self.dynamic_shared is None:
            return self.shared_size
        return max(self.shared_size, self.dynamic_shared.value.data + (dynamic_bytes + 3) // 4)

    @property
    def spill_size(self) -> int:
        """Spill slots (words) each thread has."""
        return 0 if self.spill_words is None else self.spill_words.value.data

    @property
    def local_size(self) -> int:
        """Words of each thread's `.local` frame (after its spill slots)."""
        return 0 if self.local_words is None else self.local_words.value.data

    @property
    def thread_words(self) -> int:
        """Words each thread has to itself: spill slots, then its local frame."""
        return self.spill_size + self.local_size

    def machine_blocks(self) -> list[Block]:
        return list(self.body.blocks)

    def memory_sites(self) -> list[MemoryOp]:
        """The global, shared and local accesses, in program order: the ops whose
        address the machine checks (a spill slot is in bounds by construction);
        the tensor level's `TRAP(s, l)` names site s."""
        return [op for block in self.body.blocks for op in block.ops
                if isinstance(op, MemoryOp) and op.space.data in ("global", "shared", "local")]

    # ------------------------------------------------------------ verifier
    def verify_(self) -> None:
        name = self.kernel_name
        if len(self.param_names.data) != len(self.param_types.data):
            raise VerifyException("param_names and param_types differ in length")
        for _, t in self.params:
            if t not in PARAM_TYPES:
                raise VerifyException(f"unknown parameter type '{t}'")
        for (var, _, _), (pname, ptype) in zip(self.module_data(),
                                               self.params[self.launch_params:], strict=True):
            if var != pname or ptype not in POINTER_TYPES:
                raise VerifyException(f"module variable '{var}' is not a trailing pointer "
                                      f"parameter of kernel '{name}'")
        if self.lanes.value.data != LANES:
            raise limit_error(self, f"kernel '{name}' asks for {self.lanes.value.data} lanes; "
                              f"the machine has {LANES}")
        blocks = self.machine_blocks()
        if not blocks:
            raise VerifyException(f"kernel '{name}' has no blocks")
        mem = self.mem_words.value.data
        if self.param_area_words > mem:
            raise limit_error(self, f"kernel '{name}' needs {self.param_area_words} memory words "
                              f"for its parameter area, the machine has {mem} "
                              "(option mem-words)")
        max_blocks = self.limit("max_blocks")
        if max_blocks is not None and len(blocks) > max_blocks:
            raise limit_error(self, f"kernel '{name}' needs {len(blocks)} blocks, the machine has "
                              f"{max_blocks} (option max-blocks)")
        max_ops = self.limit("max_ops")
        pointers = set(self.pointer_params())
        declared = set() if self.shared_vars is None else \
            {var for var, _, _ in shared_vars_of(self.shared_vars)}
        for index, block in enumerate(blocks):
            ops = list(block.ops)
            if not ops or not isinstance(ops[-1], TERMINATORS):
                raise VerifyException(f"block ^bb{index} of kernel '{name}' does not end "
                                      "with simt.next, simt.branch or simt.exit")
            body = ops[:-1]
            if max_ops is not None and len(body) > max_ops:
                raise limit_error(self, f"block ^bb{index} of kernel '{name}' needs "
                                  f"{len(body)} ops, the machine runs at most {max_ops} per block "
                                  "(option max-ops)")
            for op in body:
                if not isinstance(op, MachineOp):
                    raise VerifyException(f"'{op.name}' cannot appear inside a machine block")
                if isinstance(op, SharedAddrOp) and op.var.data not in declared:
                    raise VerifyException(f"simt.shared_addr: '{op.var.data}' is not a .shared "
                                          f"variable of kernel '{name}' (shared_vars)")
                if isinstance(op, MemoryOp):
                    buf = op.buffer_index
                    if buf is not None and buf not in pointers:
                        raise VerifyException(f"{op.name}: buffer {buf} is not a pointer "
                                              f"parameter of kernel '{name}'")
                    if op.is_located and self.pointer_values is None:
                        raise VerifyException(f"{op.name}: a located access in kernel "
                                              f"'{name}', which is not `pointer_values` (its "
                                              "launch has no translation words)")
                    if op.space.data == "param" and not \
                            0 <= op.offset.value.data < self.param_area_words:
                        raise VerifyException(f"{op.name}: param[{op.offset.value.data}] is "
                                              f"outside the parameter area "
                                              f"({self.param_area_words} words)")
                    if op.space.data == "spill" and not \
                            0 <= op.offset.value.data < self.spill_size:
                        raise VerifyException(f"{op.name}: spill[{op.offset.value.data}] is "
                                              f"outside the kernel's {self.spill_size} spill "
                                              "slots (spill_words)")
        self._verify_registers(blocks)

    def _verify_registers(self, blocks: list[Block]) -> None:
        name = self.kernel_name
        for prop, kinds, what, option in (("regs", ("r", "v"), "register", "regs"),
                                          ("preds", ("p", "vp"), "predicate register",
                                           "preds")):
            limit = self.limit(prop)
            if limit is None:
                continue
            top = -1
            for r in all_registers(blocks):
                if r.kind.data == kinds[1]:
                    raise VerifyException(f"kernel '{name}' is allocated ({prop} {limit}) but "
                                          f"uses virtual register {r.spelled}")
                if r.kind.data == kinds[0]:
                    top = max(top, r.index.data)
            if top + 1 > limit:
                raise limit_error(self, f"kernel '{name}' needs {plural(top + 1, what)} per "
                                  f"lane, the machine has {limit} (option {option})")


def all_registers(blocks: Sequence[Block]) -> set[RegAttr]:
    regs: set[RegAttr] = set()
    for block in blocks:
        for op in block.ops:
            if isinstance(op, MachineOp):
                regs.update(op.defs())
                regs.update(op.uses())
            elif isinstance(op, BranchOp):
                regs.update(op.uses())
    return regs


# ------------------------------------------------------------------- CFG helpers

def successors(block: Block) -> list[Block]:
    """The machine blocks a block may continue at (its terminator's successors)."""
    term = block.last_op
    return list(term.successors) if term is not None else []


def predecessors(kernel: KernelOp) -> dict[Block, list[Block]]:
    """Each block's predecessors, one entry per edge, in layout order."""
    preds: dict[Block, list[Block]] = {b: [] for b in kernel.body.blocks}
    for block in kernel.body.blocks:
        for succ in successors(block):
            preds[succ].append(block)
    return preds


def remove_unreachable(kernel: KernelOp) -> None:
    """Erase the blocks that the entry block does not reach."""
    entry = kernel.body.blocks.first
    if entry is None:
        return
    seen, work = {entry}, [entry]
    while work:
        for succ in successors(work.pop()):
            if succ not in seen:
                seen.add(succ)
                work.append(succ)
    dead = [b for b in kernel.body.blocks if b not in seen]
    for block in dead:  # first drop their edges: dead blocks may jump to each other
        term = block.last_op
        if term is not None and term.successors:
            term.detach()
            term.erase()
    for block in dead:
        for op in list(block.ops):
            op.detach()
            op.erase()
        kernel.body.detach_block(block)
        block.erase()


def kernels_of(root: Operation) -> list[KernelOp]:
    return [op for op in root.walk() if isinstance(op, KernelOp)]
