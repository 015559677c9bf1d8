// List scheduling onto layer halves: a threshold in the first MLP half after its
// operands, a memory (with its write and read) in the first attention half after
// theirs; the read's bits feed the MLP of the same layer. Coordinates reused once
// a bit is dead, pads for the energy, and errors that name the limit.
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=8 heads=1}' | filecheck %s
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=8 heads=1}' | qgc-opt | filecheck %s
// RUN: not qgc-opt %s -p 'tensor-schedule-layers{hidden=10 intermediate=8 heads=1}' 2>&1 | filecheck %s --check-prefix=HIDDEN
// RUN: not qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=2 heads=1}' 2>&1 | filecheck %s --check-prefix=NEURONS
// RUN: not qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=8 heads=0}' 2>&1 | filecheck %s --check-prefix=HEADS
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=8 heads=1 fewer-than=3}' | filecheck %s
// RUN: not qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=8 heads=1 fewer-than=2}' 2>&1 | filecheck %s --check-prefix=FEWER

builtin.module {
  tensor.program @p {
    %a = tensor.input "a" : !tensor.bits<2>
    %b = tensor.input "b" : !tensor.bits<2>
    %k = tensor.input "key" : !tensor.bits<2>
    %and = tensor.threshold %a, %b [{0 = 1, 2 = 1} >= 2, {1 = 1, 3 = 1} >= 2] : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<2>
    tensor.memory @m slots 4 width 2
    tensor.kv_write @m[binary %k], %and : !tensor.bits<2>, !tensor.bits<2>
    %r = tensor.kv_read @m[binary %k] : !tensor.bits<2> -> !tensor.bits<2>
    %x = tensor.threshold %r, %a [{0 = 1, 1 = 1, 2 = 1} >= 2] : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<1>
    tensor.output "x" %x : !tensor.bits<1>
  }
}

// %b and %a's second bit (which %x does not read) are last read by %and in mlp 0,
// so %and overwrites the lowest two of them there (two copy neurons); %b's
// second bit, also dead after mlp 0, is cleared there (a clear neuron) for the
// read in attn 1, which writes onto −1; %x overwrites %and's first bit, dead
// since the kv_write read it in attn 1.
// CHECK:      tensor.program @p layers 2 hidden 64 intermediate 8 heads 1 {
// CHECK-NEXT:   %a = tensor.input "a" coords [1, 3) : !tensor.bits<2>
// CHECK-NEXT:   %b = tensor.input "b" coords [3, 5) : !tensor.bits<2>
// CHECK-NEXT:   %k = tensor.input "key" coords [5, 7) : !tensor.bits<2>
// CHECK-NEXT:   %and = tensor.threshold %a, %b [{0 = 1, 2 = 1} >= 2, {1 = 1, 3 = 1} >= 2] at layer 0 mlp neurons [1, 5) coords [2, 4) overwrites [2, 4) : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<2>
// CHECK-NEXT:   tensor.memory @m slots 4 width 2 at layer 1 attn head 0
// CHECK-NEXT:   tensor.kv_write @m[binary %k], %and at layer 1 attn head 0 : !tensor.bits<2>, !tensor.bits<2>
// CHECK-NEXT:   %r = tensor.kv_read @m[binary %k] at layer 1 attn head 0 coords [4, 5) [7, 8) : !tensor.bits<2> -> !tensor.bits<2>
// CHECK-NEXT:   %x = tensor.threshold %r, %a [{0 = 1, 1 = 1, 2 = 1} >= 2] at layer 1 mlp neurons [1, 4) coords [2, 3) overwrites [2, 3) : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<1>
// CHECK-NEXT:   tensor.output "x" %x : !tensor.bits<1>
// CHECK-NEXT:   tensor.clear at layer 0 mlp neurons [5, 6) coords [4, 5)
// CHECK-NEXT:   tensor.pad 8 = 63
// CHECK-NEXT:   tensor.pad 9 = 7
// CHECK-NEXT:   tensor.pad 10 = 2
// CHECK-NEXT:   tensor.pad 11 = 1
// CHECK-NEXT:   tensor.pad 12 = 1
// CHECK-NEXT:   tensor.pad 13 = 1
// CHECK-NEXT: }

// HIDDEN:  error: tensor program 'p' needs 11 residual coordinates (8 for the flag and bits, of which at most 6 bits live at once, 3 pads), the layers have hidden 10 (option hidden)
// NEURONS: error: tensor program 'p' has a tensor.threshold of 2 neurons; an MLP half has 2 including the constant neuron (option intermediate)
// FEWER:   error: tensor program 'p' has no schedule of fewer than 2 layers (option fewer-than)
// HEADS:   error: tensor program 'p' needs a linear-attention head for memory @m; the layers have none (option heads)
