// Coordinate reuse: a threshold output takes a coordinate whose bit is dead by
// its half (last read there or earlier, and not an output), the one that died
// first, marked `overwrites` and paid for with one copy neuron each (or cleared
// by a `tensor.clear` in an earlier MLP half with a neuron to spare); else a
// fresh coordinate, which the embedding sets to −1, so no write changes a
// token's energy and the pads stay constant. Each threshold keeps one neuron
// per output bit of its half in reserve for those copies: it goes to a later
// half rather than fill one without them.
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

// %o (1 gadget neuron + 1 in reserve) fills layer 0's MLP with the constant
// neuron beside %p's 2 + 2, so %p goes to layer 1: %r is still read there, %o
// takes the fresh coordinate 7. %p overwrites %r's coordinates in layer 1 (its
// own reads), %t the input %c (its own read) in layer 2; the outputs stay put.
// CHECK:      tensor.program @q layers 3 hidden 64 intermediate 6 heads 1 {
// CHECK-NEXT:   %a = tensor.input "a" coords [1, 3) : !tensor.bits<2>
// CHECK-NEXT:   %k = tensor.input "k" coords [3, 4) : !tensor.bits<1>
// CHECK-NEXT:   %c = tensor.input "c" coords [4, 5) : !tensor.bits<1>
// CHECK-NEXT:   tensor.memory @m slots 2 width 2 at layer 0 attn head 0
// CHECK-NEXT:   tensor.kv_write @m[binary %k], %a at layer 0 attn head 0 : !tensor.bits<1>, !tensor.bits<2>
// CHECK-NEXT:   %r = tensor.kv_read @m[binary %k] at layer 0 attn head 0 coords [5, 7) : !tensor.bits<1> -> !tensor.bits<2>
// CHECK-NEXT:   %o = tensor.threshold %r [{0 = 1, 1 = 1} >= 2] at layer 0 mlp neurons [1, 2) coords [7, 8) : !tensor.bits<2> -> !tensor.bits<1>
// CHECK-NEXT:   %p = tensor.threshold %r [{0 = 1, 1 = 1} >= 1, {0 = 1} >= 1] at layer 1 mlp neurons [1, 5) coords [5, 7) overwrites [5, 7) : !tensor.bits<2> -> !tensor.bits<2>
// CHECK-NEXT:   %t = tensor.threshold %c, %o [{0 = 1, 1 = 1} >= 1] at layer 2 mlp neurons [1, 3) coords [4, 5) overwrites [4, 5) : !tensor.bits<1>, !tensor.bits<1> -> !tensor.bits<1>
// CHECK:        tensor.pad 8 = 63
// CHECK-NOT:    ->
// CHECK:      }
