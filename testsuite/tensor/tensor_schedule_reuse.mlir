// Coordinate reuse: a threshold output takes the lowest coordinate whose bit is
// dead by its half (last read there or earlier, and not an output), marked
// `overwrites` and paid for with one copy neuron each; without neurons to spare
// it falls back to a fresh coordinate (which the embedding sets to −1, so no
// write changes a token's energy and the pads stay constant). kv_read results
// and inputs always start on fresh coordinates.
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=6 heads=1}' | filecheck %s
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=6 heads=1}' | qgc-opt | filecheck %s
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=6 heads=1}' --print-op-generic | qgc-opt | filecheck %s

builtin.module {
  tensor.program @q {
    %a = tensor.input "a" : !tensor.bits<2>
    %k = tensor.input "k" : !tensor.bits<1>
    %c = tensor.input "c" : !tensor.bits<1>
    tensor.memory @m slots 2 width 2
    tensor.kv_write @m[binary %k], %a : !tensor.bits<1>, !tensor.bits<2>
    %r = tensor.kv_read @m[binary %k] : !tensor.bits<1> -> !tensor.bits<2>
    %o = tensor.threshold %r [{0 = 1, 1 = 1} >= 2] : !tensor.bits<2> -> !tensor.bits<1>
    %p = tensor.threshold %r [{0 = 1, 1 = 1} >= 1, {0 = 1} >= 1] : !tensor.bits<2> -> !tensor.bits<2>
    %t = tensor.threshold %c, %o [{0 = 1, 1 = 1} >= 1] : !tensor.bits<1>, !tensor.bits<1> -> !tensor.bits<1>
    tensor.output "a" %a : !tensor.bits<2>
    tensor.output "k" %k : !tensor.bits<1>
    tensor.output "p" %p : !tensor.bits<2>
    tensor.output "t" %t : !tensor.bits<1>
  }
}

// %r is read only by layer 0's MLP: %o and %p overwrite its coordinates there,
// until the half's 6 neurons are spent (constant + 3 gadget + 2 copy neurons),
// so %p's second bit is fresh (coordinate 7, −1 until written). %t overwrites the input %c,
// which it reads itself; %o (read by %t in mlp 1) and the outputs stay put.
// CHECK:      tensor.program @q layers 2 hidden 64 intermediate 6 heads 1 {
// CHECK-NEXT:   %a = tensor.input "a" coords [1, 3) : !tensor.bits<2>
// CHECK-NEXT:   %k = tensor.input "k" coords [3, 4) : !tensor.bits<1>
// CHECK-NEXT:   %c = tensor.input "c" coords [4, 5) : !tensor.bits<1>
// CHECK-NEXT:   tensor.memory @m slots 2 width 2 at layer 0 attn head 0
// CHECK-NEXT:   tensor.kv_write @m[binary %k], %a at layer 0 attn head 0 : !tensor.bits<1>, !tensor.bits<2>
// CHECK-NEXT:   %r = tensor.kv_read @m[binary %k] at layer 0 attn head 0 coords [5, 7) : !tensor.bits<1> -> !tensor.bits<2>
// CHECK-NEXT:   %o = tensor.threshold %r [{0 = 1, 1 = 1} >= 2] at layer 0 mlp neurons [1, 3) coords [5, 6) overwrites [5, 6) : !tensor.bits<2> -> !tensor.bits<1>
// CHECK-NEXT:   %p = tensor.threshold %r [{0 = 1, 1 = 1} >= 1, {0 = 1} >= 1] at layer 0 mlp neurons [3, 6) coords [6, 8) overwrites [6, 7) : !tensor.bits<2> -> !tensor.bits<2>
// CHECK-NEXT:   %t = tensor.threshold %c, %o [{0 = 1, 1 = 1} >= 1] at layer 1 mlp neurons [1, 3) coords [4, 5) overwrites [4, 5) : !tensor.bits<1>, !tensor.bits<1> -> !tensor.bits<1>
// CHECK:        tensor.pad 8 = 63
// CHECK-NOT:    ->
// CHECK:      }
