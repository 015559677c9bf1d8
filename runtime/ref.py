"""The reference engine (`--engine ref`): real CUDA semantics, straight from `ptx`.

`run_ref(module, launch, warp_size=4)` runs every thread of the grid:

- CTAs run one after another; a CTA's threads form warps of `warp_size`
  consecutive linear thread ids (`%laneid` = linear tid % warp_size);
- within a CTA, warps are scheduled round-robin, one instruction per step;
- within a warp, divergence is handled by min-PC scheduling: the warp executes
  the next instruction for the group of its runnable threads (not exited, not
  waiting at a barrier) whose PC is the smallest, so diverged paths reconverge
  at the first common point. Warp collectives (shfl, vote, ...) act on that
  group; a `.sync` one (and `bar.warp.sync`) first waits for the running
  lanes of its member mask that are elsewhere (they run first), as the
  hardware's convergence does;
- a barrier (`bar.sync`/`barrier.sync` id{, count}) releases when all
  non-exited threads of the CTA (or `count` threads) have arrived at that
  barrier id; if no thread can run while some wait, the engine traps
  (deadlock).

Instruction semantics live in `ref_ops`; the memory model in `memory`. Every
instruction is decoded once, before execution, so an unsupported instruction is
reported (`UnsupportedError`, status 2) before anything runs; a launch that does
not fit the kernel is a `LaunchError`; a fault at run time is a `Trap`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects import builtin

from qgc.dialects import ptx
from qgc.machine.abi import initial_bytes
from qgc.runtime.launch import (
    STEP_LIMITS,
    TYPE_SIZES,
    Arg,
    Launch,
    LaunchError,
    check_steps,
    select_kernel,
    step_limit_trap,
)
from qgc.runtime.memory import (
    AddressSpace,
    Layout,
    MemoryFault,
    ReadOnlySpace,
    Spaces,
    Trap,
    VarSlot,
    add_buffers,
    align_up,
)
from qgc.runtime.ref_decode import (
    ALU,
    BARRIER,
    BRANCH,
    EXIT,
    NOP,
    TRAP,
    WARP,
    BarrierSpec,
    Ctx,
    UnsupportedError,
    mask,
)
from qgc.runtime.ref_ops import compile_inst

__all__ = ["LaunchError", "RefResult", "Trap", "UnsupportedError", "compile_kernel",
           "run_ref"]

RUN, WAIT, DONE = 0, 1, 2
STEP, DEFAULT_MAX_STEPS = STEP_LIMITS["ref"]


@dataclass
class RefResult:
    """Final buffer contents (per argument; None for scalars) and run statistics."""

    buffers: list[list | None]
    stats: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------- program

@dataclass
class Program:
    """A kernel decoded for execution: one step per instruction."""

    entry: ptx.EntryOp
    steps: list[Callable]
    texts: list[str]
    wheres: list[str]
    reg_init: list
    layout: Layout
    warp_size: int
    #: per instruction, the member mask of a `.sync` warp collective (per thread)
    members: list[Callable | None] = field(default_factory=list)


def find_ptx_module(module: builtin.ModuleOp | ptx.ModuleOp) -> ptx.ModuleOp:
    if isinstance(module, ptx.ModuleOp):
        return module
    for op in module.walk():
        if isinstance(op, ptx.ModuleOp):
            return op
    raise LaunchError("the module holds no PTX module")


def pick_entry(pmod: ptx.ModuleOp, kernel: str | None) -> ptx.EntryOp:
    return select_kernel(pmod.kernels(), kernel, "PTX")


def compile_kernel(pmod: ptx.ModuleOp, entry: ptx.EntryOp, warp_size: int) -> Program:
    """Decode every instruction of `entry`; raises UnsupportedError."""
    regs: dict[str, tuple[int, str]] = {}
    reg_init: list = []
    labels: dict[str, int] = {}
    insts: list[ptx.InstOp] = []
    for op in entry.body.ops:
        if isinstance(op, ptx.RegOp):
            for name in op.names():
                regs[name] = (len(reg_init), op.type.data)
                reg_init.append(False if op.type.data == "pred" else 0)
        elif isinstance(op, ptx.LabelOp):
            labels[op.label.data] = len(insts)
        elif isinstance(op, ptx.InstOp):
            insts.append(op)
    layout = build_layout(pmod, entry)
    ctx = Ctx(regs, layout, labels, warp_size)
    steps, texts, wheres = [], [], []
    members = [_member_mask(ctx, inst) for inst in insts] + [None]
    for pc, inst in enumerate(insts):
        kind, payload = compile_inst(ctx, inst)
        text, where = inst.opcode.data, ptx.location_prefix(inst).rstrip(": ")
        steps.append(_make_step(kind, payload, _guard(ctx, inst), pc, text, where))
        texts.append(text)
        wheres.append(where)
    steps.append(_make_step(EXIT, None, None, len(insts), "ret", "end of kernel"))
    return Program(entry, steps, texts, wheres, reg_init, layout, warp_size, members)


#: the operand index of the member mask of each `.sync` warp collective
_MEMBER_MASK_AT = {"shfl": 4, "vote": 2, "match": 2, "redux": 2, "bar": 0}


def _member_mask(ctx: Ctx, inst: ptx.InstOp) -> Callable | None:
    opc = inst.op
    at = _MEMBER_MASK_AT.get(opc.base)
    if at is None or "sync" not in opc.modifiers or (opc.base == "bar") != ("warp" in
                                                                             opc.modifiers):
        return None
    args = inst.operands_decoded
    return ctx.src(args[at], "b32") if at < len(args) else None


def _guard(ctx: Ctx, inst: ptx.InstOp) -> tuple[int, bool] | None:
    reg = inst.guard_reg
    if reg is None:
        return None
    if not isinstance(reg, ptx.Reg):
        raise ctx.unsupported(f"unexpected guard '{inst.guard.data}'")
    index, rtype = ctx.reg(reg.name)
    if rtype != "pred":
        raise ctx.unsupported(f"guard '{reg.name}' is not a predicate")
    return index, reg.negated


# -------------------------------------------------------------------- layout

def build_layout(pmod: ptx.ModuleOp, entry: ptx.EntryOp) -> Layout:
    layout = Layout()
    cursors = {"global": 0x0800_0000, "const": 0, "shared": 0, "local": 0}
    dynamic: list[ptx.VarOp] = []
    variables = [op for op in pmod.body.ops if isinstance(op, ptx.VarOp)]
    variables += [op for op in entry.body.ops if isinstance(op, ptx.VarOp)]
    for var in variables:
        space = var.space.data
        name = var.sym_name.data
        if space not in cursors:
            raise _var_error(var, f"variables in .{space} are not supported")
        if var.elements == 0:
            if space != "shared":
                raise _var_error(var, f"unsized .{space} array '{name}' is not supported")
            dynamic.append(var)
            continue
        if var.linkage is not None and var.linkage.data == "extern":
            raise _var_error(var, f"external variable '{name}' is not defined in this module")
        address = align_up(cursors[space], var.alignment)
        cursors[space] = address + var.size_bytes
        try:
            init = initial_bytes(var) if space in ("global", "const") else b""
        except ValueError as e:
            raise _var_error(var, str(e)) from None
        layout.vars[name] = VarSlot(name, space, address, var.size_bytes,
                                    f"{space} variable '{name}'", init)
    layout.shared_static = cursors["shared"]
    layout.local_size = cursors["local"]
    layout.dynamic_align = max([v.alignment for v in dynamic], default=1)
    for var in dynamic:
        slot = VarSlot(var.sym_name.data, "shared", layout.dynamic_base(), 0,
                       "dynamic shared memory", dynamic=True)
        layout.vars[slot.name] = slot
        layout.dynamic_shared.append(slot)
    _layout_params(layout, entry)
    return layout


def _layout_params(layout: Layout, entry: ptx.EntryOp) -> None:
    cursor = 0
    for param in entry.params():
        ptype = param.type.data
        elem = max(1, ptx.TYPE_BITS.get(ptype, 8) // 8)
        align = param.align.value.data if param.align else elem
        address = align_up(cursor, align)
        cursor = address + param.size_bytes
        name = param.param_name.data
        layout.params[name] = VarSlot(name, "param", address, param.size_bytes,
                                      f"parameter '{name}'")


def _var_error(var: ptx.VarOp, message: str) -> UnsupportedError:
    return UnsupportedError(f"{ptx.location_prefix(var)}error: {message}")


# ------------------------------------------------------------------- steps

def _trap_message(kind: str, text: str, where: str, th, detail: str) -> str:
    kind = f"{kind} " if kind else ""
    return (f"trap: {kind}{text} at {where} by ctaid {_xyz(th.cta.ctaid)} "
            f"tid {_xyz(th.tid)}: {detail}")


def _xyz(v: tuple[int, int, int]) -> str:
    return f"({v[0]},{v[1]},{v[2]})"


def _make_step(kind: int, payload, guard, pc: int, text: str, where: str) -> Callable:
    nxt = pc + 1
    if kind == ALU:
        return _alu_step(payload, guard, nxt, text, where)
    if kind == BRANCH:
        return _branch_step(payload, guard, nxt)
    if kind == EXIT:
        return _exit_step(guard, nxt)
    if kind == WARP:
        return _warp_step(payload, guard, nxt)
    if kind == BARRIER:
        return _barrier_step(payload, guard, pc, text, where)
    if kind == TRAP:
        return _trap_step(payload, guard, nxt, text, where)
    assert kind == NOP
    return _warp_step(lambda group: None, None, nxt)


def _alu_step(fn: Callable, guard, nxt: int, text: str, where: str) -> Callable:
    gi, neg = guard if guard is not None else (None, False)

    def step(group, cta):
        for th in group:
            if gi is None or th.r[gi] != neg:
                try:
                    fn(th)
                except MemoryFault as err:
                    raise Trap(_trap_message(err.kind, text, where, th, err.detail)) from None
            th.pc = nxt
            th.n += 1
    return step


def _branch_step(target: int, guard, nxt: int) -> Callable:
    if guard is None:
        def always(group, cta):
            for th in group:
                th.pc = target
                th.n += 1
        return always
    gi, neg = guard

    def step(group, cta):
        for th in group:
            th.pc = target if th.r[gi] != neg else nxt
            th.n += 1
    return step


def _exit_step(guard, nxt: int) -> Callable:
    gi, neg = guard if guard is not None else (None, False)

    def step(group, cta):
        exited = False
        for th in group:
            th.n += 1
            if gi is None or th.r[gi] != neg:
                th.state = DONE
                cta.live -= 1
                cta.exits += 1
                exited = True
            else:
                th.pc = nxt
        if exited:
            cta.check_barriers()
    return step


def _warp_step(fn: Callable, guard, nxt: int) -> Callable:
    gi, neg = guard if guard is not None else (None, False)

    def step(group, cta):
        active = group if gi is None else [th for th in group if th.r[gi] != neg]
        if active:
            fn(active)
        for th in group:
            th.pc = nxt
            th.n += 1
    return step


def _trap_step(message: str, guard, nxt: int, text: str, where: str) -> Callable:
    gi, neg = guard if guard is not None else (None, False)

    def step(group, cta):
        for th in group:
            if gi is None or th.r[gi] != neg:
                raise Trap(_trap_message("", text, where, th, message))
            th.pc = nxt
            th.n += 1
    return step


def _barrier_step(spec: BarrierSpec, guard, pc: int, text: str, where: str) -> Callable:
    gi, neg = guard if guard is not None else (None, False)

    def step(group, cta):
        touched = set()
        for th in group:
            th.n += 1
            if gi is not None and th.r[gi] == neg:
                th.pc = pc + 1
                continue
            bid = spec.barrier(th)
            if bid > 15:
                raise Trap(_trap_message("bad barrier", text, where, th,
                                         f"barrier id {bid} is not in 0..15"))
            count = spec.count(th) if spec.count is not None else None
            cta.arrive(bid, count, th, spec, f"{text} at {where}")
            touched.add(bid)
        for bid in touched:
            cta.check_barrier(bid)
    return step


# --------------------------------------------------------------- threads

class Thread:
    """One thread: registers `r`, `pc`, `state`, ids, its warp's thread list."""

    __slots__ = ("r", "pc", "state", "tid", "lane", "warpid", "n", "sp", "cta", "warp", "cc")

    def __init__(self, regs: list, tid: tuple[int, int, int], lane: int, warpid: int,
                 sp: Spaces, cta: Cta):
        self.r, self.pc, self.state, self.tid = regs, 0, RUN, tid
        self.lane, self.warpid, self.n, self.sp, self.cta = lane, warpid, 0, sp, cta
        self.warp: list[Thread] = []
        self.cc = 0


@dataclass
class _Barrier:
    count: int | None = None
    arrived: int = 0
    waiters: list = field(default_factory=list)
    spec: BarrierSpec | None = None
    where: str = ""


class Cta:
    """One thread block and its barriers."""

    def __init__(self, ctaid, ntid, nctaid, warp_size: int, dynamic_bytes: int,
                 shared_bytes: int):
        self.ctaid, self.ntid, self.nctaid = ctaid, ntid, nctaid
        self.dynamic_bytes, self.shared_bytes = dynamic_bytes, shared_bytes
        self.threads: list[Thread] = []
        self.warps: list[list[Thread]] = []
        self.nwarps = 0
        self.live = 0
        self.exits = 0
        self.barriers: dict[int, _Barrier] = {}

    def arrive(self, bid: int, count: int | None, th: Thread, spec: BarrierSpec,
               where: str) -> None:
        bar = self.barriers.setdefault(bid, _Barrier())
        if bar.arrived == 0:
            bar.count, bar.spec, bar.where = count, spec, where
        bar.arrived += 1
        if spec.kind == "arrive":
            th.pc += 1
            return
        th.state = WAIT
        contribution = spec.pred(th) if spec.pred is not None else None
        bar.waiters.append((th, contribution, spec))

    def check_barriers(self) -> None:
        for bid in list(self.barriers):
            self.check_barrier(bid)

    def check_barrier(self, bid: int) -> None:
        bar = self.barriers.get(bid)
        if bar is None or bar.arrived == 0:
            return
        needed = bar.count if bar.count is not None else self.live
        if bar.arrived < needed:
            return
        del self.barriers[bid]
        reds: dict[str, int | bool] = {}
        for th, _contribution, spec in bar.waiters:
            if spec.kind == "red":
                value = reds.get(spec.red_op)
                if value is None:
                    value = reds[spec.red_op] = _reduce(spec.red_op, bar.waiters)
                spec.dest(th, value)
            th.state = RUN
            th.pc += 1

    def deadlock(self) -> str:
        waiting: dict[str, int] = {}
        for th in self.threads:
            if th.state == WAIT:
                for bid, bar in self.barriers.items():
                    if any(w[0] is th for w in bar.waiters):
                        key = f"barrier {bid} ({bar.where})"
                        waiting[key] = waiting.get(key, 0) + 1
        parts = [f"{n} thread{'s' if n != 1 else ''} wait at {k}" for k, n in waiting.items()]
        exited = sum(th.state == DONE for th in self.threads)
        return (f"trap: barrier deadlock in ctaid {_xyz(self.ctaid)}: no thread can run; "
                + "; ".join(parts) + f"; {exited} of {len(self.threads)} threads exited")


def _reduce(op: str, waiters: list) -> int | bool:
    values = [bool(c) for _, c, _ in waiters]
    if op == "popc":
        return sum(values)
    return all(values) if op == "and" else any(values)


# ------------------------------------------------------------- scheduling

def _pick(warp: list[Thread], members: list[Callable | None]) -> list[Thread] | None:
    """The runnable threads of the warp at the smallest PC (min-PC); past a
    `.sync` collective that waits for lanes of its member mask still
    elsewhere (`_converged`)."""
    best = -1
    group = None
    for th in warp:
        if th.state == RUN:
            p = th.pc
            if group is None or p < best:
                best, group = p, [th]
            elif p == best:
                group.append(th)
    if group is None or members[best] is None or _converged(warp, group, members[best]):
        return group
    by_pc: dict[int, list[Thread]] = {}
    for th in warp:
        if th.state == RUN:
            by_pc.setdefault(th.pc, []).append(th)
    for pc in sorted(by_pc)[1:]:
        if members[pc] is None or _converged(warp, by_pc[pc], members[pc]):
            return by_pc[pc]
    return group       # every group waits for another: run the lowest (as before)


def _converged(warp: list[Thread], group: list[Thread], members: Callable) -> bool:
    """Whether every running lane of the group's member mask is in the group."""
    mask = 0
    for th in group:
        mask |= members(th)
    pc = group[0].pc
    return not any(th.state == RUN and th.pc != pc and mask >> th.lane & 1 for th in warp)


def run_cta(cta: Cta, steps: list[Callable], budget: int, max_steps: int | None = None,
            members: list[Callable | None] | None = None) -> tuple[int, int]:
    """Run one CTA to completion within `budget` warp steps (what is left of
    the launch's `max_steps`); returns (warp steps, thread instructions)."""
    warps = list(cta.warps)
    members = members or [None] * len(steps)
    nsteps = ninst = 0
    exits = cta.exits
    while warps:
        progressed = False
        for warp in warps:
            group = _pick(warp, members)
            if group is None:
                continue
            steps[group[0].pc](group, cta)
            progressed = True
            nsteps += 1
            ninst += len(group)
        if not progressed:
            if any(th.state == WAIT for th in cta.threads):
                raise Trap(cta.deadlock())
            break
        if nsteps > budget:
            raise step_limit_trap(budget if max_steps is None else max_steps, STEP,
                                  f" in ctaid {_xyz(cta.ctaid)}")
        if cta.exits != exits:
            exits = cta.exits
            warps = [w for w in warps if any(th.state != DONE for th in w)]
    return nsteps, ninst


# ------------------------------------------------------------- arguments

_STRUCT = {"u8": "B", "s8": "b", "u16": "H", "s16": "h", "u32": "I", "s32": "i",
           "u64": "Q", "s64": "q", "f32": "f", "f64": "d"}


def check_args(entry: ptx.EntryOp, args: list[Arg]) -> None:
    params = [p for p in entry.params() if p.ret is None]
    if len(args) != len(params):
        raise LaunchError(f"kernel '{entry.kernel_name}' takes {len(params)} "
                          f"argument{'s' if len(params) != 1 else ''}, the launch gives "
                          f"{len(args)}")
    for i, (arg, param) in enumerate(zip(args, params, strict=True)):
        problem = _arg_problem(arg, param)
        if problem:
            raise LaunchError(f"args[{i}]: {problem}")


def _arg_problem(arg: Arg, param: ptx.ParamOp) -> str:
    ptype = param.type.data
    pname = param.param_name.data
    spelled = f".{ptype}" + (f"[{param.count.value.data}]" if param.count else "")
    what = f"parameter '{pname}' of type {spelled}"
    if param.count is not None:
        return f"{what} is an aggregate; launches can pass only scalars and pointers"
    bits = ptx.TYPE_BITS.get(ptype)
    if arg.pointer:
        if bits != 64 or ptype[0] == "f":
            return (f"a pointer ({arg.spelled}) cannot be passed to {what} "
                    "(pointers need a 64-bit integer parameter)")
        return ""
    if bits != TYPE_SIZES[arg.type] * 8:
        return f"a {arg.type} value cannot be passed to {what} (sizes differ)"
    if (arg.type[0] == "f") != (ptype[0] == "f") and ptype[0] != "b":
        return f"a {arg.type} value cannot be passed to {what}"
    return ""


def _encode(elem: str, values: list) -> bytes:
    if elem == "f32":
        return b"".join(struct.pack("<f", v) for v in values)
    return struct.pack(f"<{len(values)}{_STRUCT[elem]}", *values)


def _decode(elem: str, data: bytes) -> list:
    n = len(data) // TYPE_SIZES[elem]
    return list(struct.unpack(f"<{n}{_STRUCT[elem]}", data))


def _param_space(program: Program, args: list[Arg], bases: dict[int, int]) -> AddressSpace:
    space = ReadOnlySpace("param")
    for i, (slot, arg) in enumerate(zip(program.layout.params.values(), args, strict=False)):
        size = slot.size
        if arg.pointer:
            value = (bases[i] + arg.offset * TYPE_SIZES[arg.type]) & mask(64)
            data = value.to_bytes(size, "little")
        elif arg.type[0] == "f":        # f32, f64: the float's bytes
            data = _encode(arg.type, [arg.value])
        else:
            data = (arg.value & mask(8 * size)).to_bytes(size, "little")
        space.add(slot.address, size, slot.label, data)
    return space


# -------------------------------------------------------------------- run

def run_ref(module: builtin.ModuleOp | ptx.ModuleOp, launch: Launch, warp_size: int = 4,
            max_steps: int = DEFAULT_MAX_STEPS) -> RefResult:
    """Run `launch` on the PTX in `module`; see the module docstring."""
    if warp_size < 1 or warp_size > 32 or warp_size & (warp_size - 1):
        raise LaunchError(f"warp size {warp_size} is not a power of two in 1..32")
    check_steps(launch, max_steps, STEP, warp_size)
    pmod = find_ptx_module(module)
    entry = pick_entry(pmod, launch.kernel)
    program = compile_kernel(pmod, entry, warp_size)
    check_args(entry, launch.args)
    glob, const = program.layout.module_spaces()
    buffers = [(i, _buffer_note(a, program, i), _encode(a.type, a.data or []))
               for i, a in enumerate(launch.args) if a.pointer]
    bases = dict(zip([b[0] for b in buffers], add_buffers(glob, buffers), strict=True))
    param = _param_space(program, launch.args, bases)
    stats = {"ctas": 0, "warps": 0, "threads": 0, "warp_instructions": 0,
             "instructions": 0}
    budget = max_steps
    for ctaid in _grid(launch.grid):
        cta = _make_cta(program, launch, ctaid, glob, const, param)
        nsteps, ninst = run_cta(cta, program.steps, budget, max_steps, program.members)
        budget -= nsteps
        stats["ctas"] += 1
        stats["warps"] += cta.nwarps
        stats["threads"] += len(cta.threads)
        stats["warp_instructions"] += nsteps
        stats["instructions"] += ninst
    results: list[list | None] = []
    for i, arg in enumerate(launch.args):
        if not arg.pointer:
            results.append(None)
            continue
        size = len(arg.data or []) * TYPE_SIZES[arg.type]
        results.append(_decode(arg.type, glob.read_bytes(bases[i], size)))
    return RefResult(results, stats)


def _buffer_note(arg: Arg, program: Program, index: int) -> str:
    names = list(program.layout.params)
    name = arg.name or (names[index] if index < len(names) else f"#{index}")
    return f"arg '{name}'"


def _grid(grid: tuple[int, int, int]):
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                yield (x, y, z)


def _make_cta(program: Program, launch: Launch, ctaid, glob: AddressSpace,
              const: AddressSpace, param: AddressSpace) -> Cta:
    layout, w = program.layout, program.warp_size
    dyn = launch.dynamic_shared_bytes
    total_shared = layout.dynamic_base() + dyn if layout.dynamic_shared else \
        layout.shared_static
    cta = Cta(ctaid, launch.block, launch.grid, w, dyn, total_shared)
    shared = layout.shared_space(dyn)
    has_local = layout.has_local()
    common = Spaces(glob, const, param, shared, layout.local_space())
    bx, by, _ = launch.block
    for linear in range(launch.threads_per_block):
        tid = (linear % bx, (linear // bx) % by, linear // (bx * by))
        sp = Spaces(glob, const, param, shared, layout.local_space()) if has_local else common
        th = Thread(list(program.reg_init), tid, linear % w, linear // w, sp, cta)
        cta.threads.append(th)
    cta.warps = [cta.threads[i:i + w] for i in range(0, len(cta.threads), w)]
    for warp in cta.warps:
        for th in warp:
            th.warp = warp
    cta.nwarps = len(cta.warps)
    cta.live = len(cta.threads)
    return cta

