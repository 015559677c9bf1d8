// Sum rows: an output bit that is Σ c·[L ≥ t] over threshold parts (XOR as a
// staircase, a full adder of ANDs). `(>= t)` repeats the form of the part before
// it; equal parts of one op share their neurons, so the scheduler counts them once.
// RUN: qgc-opt %s | filecheck %s
// RUN: qgc-opt %s --print-op-generic | qgc-opt | filecheck %s
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=16 heads=1}' | filecheck %s --check-prefix=SCHED

builtin.module {
  tensor.program @fa {
    %x = tensor.input "x" : !tensor.bits<6>
    %s = tensor.threshold %x [{0 = 1, 1 = 1} >= 1 - (>= 2), {0 = 1, 3 = 1} >= 2 + {1 = 1, 4 = 1} >= 2 + {2 = 1, 5 = 1} >= 2 - 2 * {0 = 1, 1 = 1, 3 = 1, 4 = 1} >= 4 - 2 * {0 = 1, 2 = 1, 3 = 1, 5 = 1} >= 4 - 2 * {1 = 1, 2 = 1, 4 = 1, 5 = 1} >= 4 + 4 * {0 = 1, 1 = 1, 2 = 1, 3 = 1, 4 = 1, 5 = 1} >= 6, {0 = 1, 1 = 1, 3 = 1, 4 = 1} >= 4 + {0 = 1, 2 = 1, 3 = 1, 5 = 1} >= 4 + {1 = 1, 2 = 1, 4 = 1, 5 = 1} >= 4 - 2 * {0 = 1, 1 = 1, 2 = 1, 3 = 1, 4 = 1, 5 = 1} >= 6] : !tensor.bits<6> -> !tensor.bits<3>
    tensor.output "s" %s : !tensor.bits<3>
  }
}

// CHECK:      %s = tensor.threshold %x [{0 = 1, 1 = 1} >= 1 - (>= 2), {0 = 1, 3 = 1} >= 2 + {1 = 1, 4 = 1} >= 2
// CHECK-SAME: + 4 * {0 = 1, 1 = 1, 2 = 1, 3 = 1, 4 = 1, 5 = 1} >= 6, {0 = 1, 1 = 1, 3 = 1, 4 = 1} >= 4 +

// XOR: a bottom and a top part, 1 neuron each; the full adder's sum 7 (three
// ANDs, their three pairs and the triple, 1 each) and its carry none of its
// own (its 4 parts are the sum's); 3 copy neurons to overwrite dead inputs.
// SCHED: %s = tensor.threshold %x [{{.*}}] at layer 0 mlp neurons [1, 13) coords [1, 4) overwrites [1, 4)
