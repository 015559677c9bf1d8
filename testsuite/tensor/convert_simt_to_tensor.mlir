// One machine step as one step program: the record staging at layer 0, one
// memory port per read (written by every commit), the block's ops per lane,
// the outbox (a record slot per store lane) and the next-token outputs. The
// simt kernel stays in the module beside the program.
// RUN: qgc-opt %s -p convert-simt-to-tensor | filecheck %s
// RUN: qgc-opt %s -p convert-simt-to-tensor | qgc-opt | filecheck %s
// RUN: not qgc-opt %s -p 'convert-simt-to-tensor{max-warps=9}' 2>&1 | filecheck %s --check-prefix=WARPS

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 64 {
    simt.ld r0, param[0]
    simt.st global[r0 + 0], 7 buffer 0
    simt.exit
  }
}

// CHECK:      simt.kernel @k(ptr a) lanes 4 mem_words 64 {
// CHECK:      tensor.program @k_step attributes {qgc.vocab = {records = #builtin.int<4>, blocks = #builtin.int<1>, warps = #builtin.int<8>}} {
// CHECK:        %{{.*}} = tensor.input "is_a" : !tensor.bits<1>
// CHECK:        %{{.*}} = tensor.input "code" : !tensor.bits<31>
// CHECK:        tensor.memory @stage_a slots 1 width 12
// CHECK:        tensor.memory @stage_b0 slots 1 width 8
// CHECK:        tensor.memory @launch_0 slots 127 width 32
// CHECK:        tensor.memory @mem_1 slots 127 width 32
// CHECK:        tensor.memory @outbox_0 slots 1 width 41
// CHECK:        tensor.memory @outbox_3 slots 1 width 41
// CHECK:        tensor.memory @outbox_end slots 1 width 2
// CHECK:        tensor.output "next_kind" %{{.*}} : !tensor.bits<4>
// CHECK:        tensor.output "next_end" %{{.*}} : !tensor.bits<2>

// WARPS: error: convert-simt-to-tensor: max-warps must be 1..8
