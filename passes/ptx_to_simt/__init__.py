"""Instruction selection for `convert-ptx-to-simt` (the pass is
`qgc.passes.convert_ptx_to_simt`), one module per concern:

- `selector`: `Selector`, one PTX entry to one `simt.kernel`, composed from
  the mixins below; `blocks` (basic blocks, terminators), `parameters`
  (pointer or scalar parameters, `.shared` variables), `scalar` (32-bit
  operands, `mov`, predicate logic, `setp`), `subword` (8/16-bit values),
  `warp` (`shfl`, `vote`, `activemask`), `memory` (ld/st/atom), `ordering`
  (fences and `bar.warp.sync`: no ops on the machine's order), `wide`
  (64-bit views and register pairs), `addresses` (pointer arithmetic);
- `legalize`: 64-bit integers as register pairs and sub-word values on the
  32-bit machine (the `Emitter` and the pair arithmetic).

64-bit address arithmetic is narrowed to 32-bit word addresses. A 64-bit PTX
register holds either a *pointer* into the buffer of pointer parameter N (its
provenance), whose word address lives in a virtual register, or an *integer*
`ext(v) * scale` bytes (from `mul.wide`, `cvt` to 64 bits, `shl`/`mul.lo` by a
constant). `cvta.to.global` is the identity; `ptr + int` adds `v * scale / 4`
words (a byte offset that is not a multiple of 4 is refused); every
`ld/st/atom.global` carries the provenance of its pointer (`buffer N`), which
the machine checks against that buffer's bounds. Where the kernel has no
backward branch, an identity-like 64-bit instruction whose source and
destination are each written once costs no op (the destination aliases the
source's register). `ld.param` is a load from the parameter area at the
parameter's word. `.shared` variables are declared on the kernel
(`shared_vars`) and their addresses named by `simt.shared_addr`;
`simt-layout-memory` places them.
"""
