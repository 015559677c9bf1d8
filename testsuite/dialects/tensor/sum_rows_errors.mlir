// A sum row's `(>= t)` needs a part before it to take the form from.
// RUN: not qgc-opt %s 2>&1 | filecheck %s

builtin.module {
  tensor.program @bad {
    %x = tensor.input "x" : !tensor.bits<2>
    %s = tensor.threshold %x [(>= 1)] : !tensor.bits<2> -> !tensor.bits<1>
    tensor.output "s" %s : !tensor.bits<1>
  }
}
// CHECK: sum_rows_errors.mlir:7:32
// CHECK: `(>= t)` repeats the form of the part before it; there is none
