// One machine step as one step program: the record staging at layer 0 (the
// record's slot and address, the step's warp, the bytes), the launch-area
// ports, every block's register ports (in block b, register port j of lane l:
// a head keyed by warp and register, read in b's group) and memory ports (all
// written by every commit), every block's ops per lane, the outbox (a record slot per
// store lane and per live-out register lane, then the preds, lanes and flags words:
// their valid bits side by side, per record a memory of its word and one of
// its 10-bit address, each read back as the merge of the R reads: the value
// of the current record, the address of the next valid one), the step's end
// (block, exited, barrier) and the next-token outputs (a fault of the store,
// its one memory site, names `TRAP(site, lane)` in place of the records). Each block's ops are grouped by its
// bit of `exec_b` (zero unless it runs). The simt kernel stays in the module.
// CHECK-GROUPED: tensor.threshold {{.*}} group 1
// RUN: qgc-opt %s -p convert-simt-to-tensor | filecheck %s
// RUN: qgc-opt %s -p convert-simt-to-tensor | qgc-opt | filecheck %s
// RUN: qgc-opt %s -p convert-simt-to-tensor | filecheck %s --check-prefix=CHECK-GROUPED
// RUN: not qgc-opt %s -p 'convert-simt-to-tensor{max-warps=9}' 2>&1 | filecheck %s --check-prefix=WARPS
// RUN: sed 's/regs 15/regs 16/' %s | not qgc-opt -p convert-simt-to-tensor 2>&1 | filecheck %s --check-prefix=REGS

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 64 max_blocks 256 max_ops 16 regs 15 preds 8 {
    simt.ld r0, param[0]
    simt.special r1, "tid.x"
    simt.setp "lt.u" p0, r1, 2
    simt.branch p0, ^bb1, ^bb2
  ^bb1:
    simt.st global[r0 + 0], r1 buffer 0
    simt.exit
  ^bb2:
    simt.exit
  }
}

// CHECK:      simt.kernel @k(ptr a) lanes 4 mem_words 64
// CHECK:      tensor.program @k_step groups "exec_b" attributes {qgc.vocab = {records = #builtin.int<11>, blocks = #builtin.int<3>, warps = #builtin.int<8>, sites = #builtin.int<1>, ports = [[], [#builtin.int<0>, #builtin.int<1>], []]}} {
// CHECK:        %{{.*}} = tensor.input "is_a" : !tensor.bits<1>
// CHECK:        %{{.*}} = tensor.input "rec_a" : !tensor.bits<10>
// CHECK:        %{{.*}} = tensor.input "exec_b" : !tensor.bits<3>
// CHECK-NOT:    tensor.input "port
// CHECK:        tensor.memory @stage_a slots 1 width 21
// CHECK:        tensor.memory @stage_w slots 1 width 3
// CHECK:        tensor.memory @stage_b0 slots 1 width 8
// CHECK:        tensor.memory @launch_0 slots 127 width 32
// CHECK:        tensor.memory @mem_{{[0-9]+}} slots 127 width 32
// CHECK:        tensor.memory @reg_1_0_0 slots 127 width 32
// CHECK:        tensor.memory @reg_1_1_3 slots 127 width 32
// CHECK:        tensor.kv_read @reg_1_1_3{{.*}} group 1
// CHECK:        tensor.memory @outbox_valid slots 1 width 11
// CHECK:        tensor.memory @outbox_0 slots 1 width 32
// CHECK:        tensor.memory @outbox_a0 slots 1 width 10
// CHECK:        tensor.memory @outbox_10 slots 1 width 32
// CHECK:        tensor.memory @outbox_a10 slots 1 width 10
// CHECK:        tensor.merge
// CHECK:        tensor.merge
// CHECK:        tensor.memory @outbox_end slots 1 width 10
// CHECK:        tensor.output "next_kind" %{{.*}} : !tensor.bits<5>
// CHECK:        tensor.output "next_site" %{{.*}} : !tensor.bits<1>
// CHECK:        tensor.output "next_lane" %{{.*}} : !tensor.bits<2>
// CHECK:        tensor.output "next_a" %{{.*}} : !tensor.bits<10>
// CHECK:        tensor.output "next_end" %{{.*}} : !tensor.bits<4>
// CHECK:        tensor.output "next_bar" %{{.*}} : !tensor.bits<1>

// WARPS: error: convert-simt-to-tensor: max-warps must be 1..8
// REGS: error: the tensor level takes a kernel with at most 15 physical registers per lane
