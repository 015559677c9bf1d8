// The simt verifier checks the limits a kernel declares and the names it uses
// (MLIR's -verify-diagnostics).
// RUN: qgc-opt %s --split-input-file --verify-diagnostics

builtin.module {
  // expected-error@+1 {{block ^bb0 of kernel 'k' needs 3 ops, the machine runs at most 2 per block (option max-ops)}}
  simt.kernel @k(ptr a) lanes 4 mem_words 128 max_blocks 32 max_ops 2 {
    simt.ld v0, param[0]
    simt.alu "add" v0, v0, 1
    simt.st global[v0 + 0], 5 buffer 0
    simt.exit
  }
}

// -----

// The kernel checks the names its ops use: the error is at the kernel.
builtin.module {
  // expected-error@+1 {{simt.shared_addr: 'u' is not a .shared variable of kernel 'k' (shared_vars)}}
  simt.kernel @k(ptr a) lanes 4 mem_words 128 shared_vars (t: 4 align 4) {
    simt.shared_addr v1, "u"
    simt.exit
  }
}

// -----

// A located access (a 64-bit byte address) names no buffer, and is global.
builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 pointer_values {
    // expected-error@+1 {{a located access has a 64-bit byte address and no buffer: the machine finds its buffer at run time}}
    simt.ld r0, global[r1:r2 + 0] buffer 0
    simt.exit
  }
}

// -----

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 pointer_values {
    // expected-error@+1 {{only a global access takes a 64-bit byte address}}
    simt.ld r0, shared[r1:r2 + 0]
    simt.exit
  }
}

// -----

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 local_words 2 {
    // expected-error@+1 {{a local access names no buffer: its address is a byte address in the thread's local frame}}
    simt.ld r0, local[r1 + 0] buffer 0
    simt.exit
  }
}

// -----

// A located access needs the translation words of a `pointer_values` kernel.
builtin.module {
  // expected-error@+1 {{simt.ld: a located access in kernel 'k', which is not `pointer_values` (its launch has no translation words)}}
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld r0, global[r1:r2 + 0]
    simt.exit
  }
}
