// A one-hot pick too wide for one MLP half: Σ_k [e_k ∧ v_k] over four
// choices of two bits, 8 neurons, with 5 a half (4 and the constant neuron)
// becomes picks over choices 0–1 and 2–3 (4 neurons each, over their own
// operands) and their OR, row by row. A row that is not a sum of positive parts
// (the XOR below) is left whole.
// RUN: qgc-opt %s -p 'tensor-split-thresholds{intermediate=5}' | filecheck %s
// RUN: qgc-opt %s -p 'tensor-split-thresholds{intermediate=9}' | filecheck %s --check-prefix=FITS
// RUN: qgc-opt %s -p 'tensor-split-thresholds{intermediate=5},tensor-schedule-layers{hidden=64 intermediate=5 heads=1}' | filecheck %s --check-prefix=SCHED
// RUN: not qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=5 heads=1}' 2>&1 | filecheck %s --check-prefix=WHOLE

builtin.module {
  tensor.program @pick {
    %e = tensor.input "e" : !tensor.bits<4>
    %v = tensor.input "v" : !tensor.bits<8>
    %e0 = tensor.slice %e [0, 1) : !tensor.bits<4> -> !tensor.bits<1>
    %e1 = tensor.slice %e [1, 2) : !tensor.bits<4> -> !tensor.bits<1>
    %e2 = tensor.slice %e [2, 3) : !tensor.bits<4> -> !tensor.bits<1>
    %e3 = tensor.slice %e [3, 4) : !tensor.bits<4> -> !tensor.bits<1>
    %v0 = tensor.slice %v [0, 2) : !tensor.bits<8> -> !tensor.bits<2>
    %v1 = tensor.slice %v [2, 4) : !tensor.bits<8> -> !tensor.bits<2>
    %v2 = tensor.slice %v [4, 6) : !tensor.bits<8> -> !tensor.bits<2>
    %v3 = tensor.slice %v [6, 8) : !tensor.bits<8> -> !tensor.bits<2>
    %p = tensor.threshold %e0, %v0, %e1, %v1, %e2, %v2, %e3, %v3 [{0 = 1, 1 = 1} >= 2 + {3 = 1, 4 = 1} >= 2 + {6 = 1, 7 = 1} >= 2 + {9 = 1, 10 = 1} >= 2, {0 = 1, 2 = 1} >= 2 + {3 = 1, 5 = 1} >= 2 + {6 = 1, 8 = 1} >= 2 + {9 = 1, 11 = 1} >= 2] : !tensor.bits<1>, !tensor.bits<2>, !tensor.bits<1>, !tensor.bits<2>, !tensor.bits<1>, !tensor.bits<2>, !tensor.bits<1>, !tensor.bits<2> -> !tensor.bits<2>
    %x = tensor.threshold %v [{0 = 1, 1 = 1} >= 1 - (>= 2)] : !tensor.bits<8> -> !tensor.bits<1>
    tensor.output "p" %p : !tensor.bits<2>
    tensor.output "x" %x : !tensor.bits<1>
  }
}

// CHECK:      %[[A:.*]] = tensor.threshold %e0, %v0, %e1, %v1 [{0 = 1, 1 = 1} >= 2 + {3 = 1, 4 = 1} >= 2, {0 = 1, 2 = 1} >= 2 + {3 = 1, 5 = 1} >= 2] : !tensor.bits<1>, !tensor.bits<2>, !tensor.bits<1>, !tensor.bits<2> -> !tensor.bits<2>
// CHECK-NEXT: %[[B:.*]] = tensor.threshold %e2, %v2, %e3, %v3 [{0 = 1, 1 = 1} >= 2 + {3 = 1, 4 = 1} >= 2, {0 = 1, 2 = 1} >= 2 + {3 = 1, 5 = 1} >= 2] : !tensor.bits<1>, !tensor.bits<2>, !tensor.bits<1>, !tensor.bits<2> -> !tensor.bits<2>
// CHECK-NEXT: %[[P:.*]] = tensor.threshold %[[A]], %[[B]] [{0 = 1, 2 = 1} >= 1, {1 = 1, 3 = 1} >= 1] : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<2>
// CHECK-NEXT: %x = tensor.threshold %v [{0 = 1, 1 = 1} >= 1 - (>= 2)]
// CHECK:      tensor.output "p" %[[P]] : !tensor.bits<2>

// FITS:     %p = tensor.threshold %e0, %v0, %e1, %v1, %e2, %v2, %e3, %v3
// FITS-NOT: tensor.threshold %e2

// The two picks fill a half each (4 neurons), their OR the next one.
// SCHED:      tensor.program @pick layers 4
// SCHED:      tensor.threshold %e0, %v0, %e1, %v1 [{{.*}}] at layer 0 mlp neurons [1, 5)
// SCHED-NEXT: tensor.threshold %e2, %v2, %e3, %v3 [{{.*}}] at layer 1 mlp neurons [1, 5)
// SCHED-NEXT: %p = tensor.threshold {{.*}} at layer 2 mlp
// WHOLE: error: tensor program 'pick' has a tensor.threshold of 8 neurons; an MLP half has 5 including the constant neuron
