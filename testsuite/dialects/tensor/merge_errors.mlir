// The verifier refuses a tensor.merge of anything but tensor.kv_read results,
// and a merged read with another use (MLIR's -verify-diagnostics).
// RUN: qgc-opt %s --split-input-file --verify-diagnostics

// A merge operand that is not a kv_read result (an input):
builtin.module {
  tensor.program @bad {
    %k = tensor.input "k" : !tensor.bits<1>
    %v = tensor.input "v" : !tensor.bits<2>
    tensor.memory @m slots 1 width 2
    %r = tensor.kv_read @m[binary %k] : !tensor.bits<1> -> !tensor.bits<2>
    // expected-error@+1 {{tensor.merge merges the results of tensor.kv_read ops}}
    %x = tensor.merge %r, %v : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<2>
    tensor.output "x" %x : !tensor.bits<2>
  }
}

// -----

// A merged read with a use besides the merge:
builtin.module {
  tensor.program @bad {
    %k = tensor.input "k" : !tensor.bits<1>
    tensor.memory @m slots 1 width 2
    %r = tensor.kv_read @m[binary %k] : !tensor.bits<1> -> !tensor.bits<2>
    tensor.memory @n slots 1 width 2
    %q = tensor.kv_read @n[binary %k] : !tensor.bits<1> -> !tensor.bits<2>
    // expected-error@+1 {{a read that tensor.merge takes has no other use}}
    %x = tensor.merge %r, %q : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<2>
    tensor.output "x" %x : !tensor.bits<2>
    tensor.output "q" %q : !tensor.bits<2>
  }
}
