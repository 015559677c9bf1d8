// A sum row's `(>= t)` needs a part before it to take the form from.
// RUN: qgc-opt %s --verify-diagnostics

builtin.module {
  tensor.program @bad {
    %x = tensor.input "x" : !tensor.bits<2>
    // expected-error@+1 {{`(>= t)` repeats the form of the part before it; there is none}}
    %s = tensor.threshold %x [(>= 1)] : !tensor.bits<2> -> !tensor.bits<1>
    tensor.output "s" %s : !tensor.bits<1>
  }
}
