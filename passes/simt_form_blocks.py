"""`simt-form-blocks{max-ops=16 max-blocks=64 max-products=0}`: machine blocks
of at most `max-ops` ops and `max-products` products, at most `max-blocks` of
them.

One machine block is what a warp executes in one step (one EXEC token), so
fewer, fuller blocks mean fewer steps. The pass drops unreachable blocks,
bypasses empty blocks (`simt.next` only), fuses a block into its predecessor
when it is that predecessor's only successor and has no other predecessor,
then splits every block longer than `max-ops` ops (terminator not counted),
or with more than `max-products` products of two registers (0: any number; a
`mul.lo` and a `mul.hi` of the same factors, PTX's `mul.wide`, count once),
into consecutive blocks chained by `simt.next`. Fewer products per block
narrow the `tensor` level, whose multipliers are its widest circuits (all of
a block's run side by side), at the price of more steps. A kernel that still needs more
than `max-blocks` blocks is refused:
`error: kernel 'k' needs 40 blocks, the machine has 32 (option max-blocks)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Block
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import ptx, simt


def _bypass_empty(kernel: simt.KernelOp) -> bool:
    entry = kernel.body.blocks.first
    for block in kernel.body.blocks:
        term = block.last_op
        if block is entry or len(block.ops) != 1 or not isinstance(term, simt.NextOp) or \
                term.dest is block:
            continue
        target = term.dest
        for other in kernel.body.blocks:
            t = other.last_op
            if other is block or t is None:
                continue
            for i, succ in enumerate(t.successors):
                if succ is block:
                    t.successors[i] = target
        return True
    return False


def _fuse(kernel: simt.KernelOp) -> bool:
    preds = simt.predecessors(kernel)
    entry = kernel.body.blocks.first
    for block in kernel.body.blocks:
        term = block.last_op
        if not isinstance(term, simt.NextOp):
            continue
        succ = term.dest
        if succ is block or succ is entry or preds[succ] != [block]:
            continue
        term.detach()
        term.erase()
        for op in list(succ.ops):
            op.detach()
            block.add_op(op)
        kernel.body.detach_block(succ)
        succ.erase()
        return True
    return False


def _product(op) -> frozenset | None:
    """The factors of a product of two registers."""
    if isinstance(op, simt.AluOp) and op.opcode.data.startswith(("mul.lo", "mul.hi", "mad.lo")):
        factors = op.srcs.data[:2]
        if all(isinstance(f, simt.RegAttr) for f in factors):
            return frozenset(factors)
    return None


def _split_point(ops: list, max_ops: int, max_products: int) -> int | None:
    """Where a block of `ops` (terminator last) must end, or None."""
    products: set[frozenset] = set()
    for i, op in enumerate(ops[:-1]):
        if i == max_ops:
            return i
        factors = _product(op)
        if max_products and factors is not None and factors not in products:
            if len(products) == max_products:
                return i
            products.add(factors)
    return None


def _split(kernel: simt.KernelOp, max_ops: int, max_products: int) -> None:
    for block in list(kernel.body.blocks):
        while (at := _split_point(list(block.ops), max_ops, max_products)) is not None:
            rest = list(block.ops)[at:]
            tail = Block()
            kernel.body.insert_block_after(tail, block)
            for op in rest:
                op.detach()
                tail.add_op(op)
            block.add_op(simt.NextOp(tail))
            block = tail


def form_blocks(kernel: simt.KernelOp, max_ops: int, max_blocks: int,
                max_products: int = 0) -> None:
    simt.remove_unreachable(kernel)
    while _bypass_empty(kernel):
        simt.remove_unreachable(kernel)
    while _fuse(kernel):
        pass
    _split(kernel, max_ops, max_products)
    n = len(kernel.body.blocks)
    if n > max_blocks:
        raise DiagnosticException(
            f"{ptx.location_prefix(kernel)}error: kernel '{kernel.kernel_name}' needs {n} "
            f"blocks, the machine has {max_blocks} (option max-blocks)")
    kernel.set_limit("max_ops", max_ops)
    kernel.set_limit("max_blocks", max_blocks)


@dataclass(frozen=True)
class SimtFormBlocksPass(ModulePass):
    name = "simt-form-blocks"

    max_ops: int = simt.DEFAULT_MAX_OPS
    """Machine ops per block (one EXEC step), terminator not counted."""

    max_blocks: int = simt.DEFAULT_MAX_BLOCKS
    """Machine blocks per kernel."""

    max_products: int = 0
    """Products of two registers per block (0: any number)."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.max_ops < 1 or self.max_blocks < 1 or self.max_products < 0:
            raise DiagnosticException("error: simt-form-blocks: max-ops and max-blocks must "
                                      "be positive, max-products not negative")
        for kernel in simt.kernels_of(op):
            form_blocks(kernel, self.max_ops, self.max_blocks, self.max_products)
