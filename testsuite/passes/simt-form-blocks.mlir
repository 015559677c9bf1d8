// Fuse the chain, then split it into blocks of at most max-ops ops.
// RUN: qgc-opt %s -p 'simt-form-blocks{max-ops=2}' | filecheck %s
// RUN: qgc-opt %s -p 'simt-form-blocks{max-ops=1 max-blocks=3}' --verify-diagnostics

builtin.module {
  // expected-error@+1 {{kernel 'k' needs 5 blocks, the machine has 3 (option max-blocks)}}
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.next ^bb1
  ^bb1:
    simt.next ^bb2
  ^bb2:
    simt.alu "add" v2, v0, v1
    simt.st global[v2 + 0], v1 buffer 0
    simt.alu "mov" v3, 7
    simt.next ^bb3
  ^bb3:
    simt.exit
  }
}

// CHECK:      simt.kernel @k(ptr a) lanes 4 mem_words 128 max_blocks 256 max_ops 2 {
// CHECK-NEXT:   simt.ld v0, param[0]
// CHECK-NEXT:   simt.special v1, "tid.x"
// CHECK-NEXT:   simt.next ^bb1
// CHECK-NEXT: ^bb1:
// CHECK-NEXT:   simt.alu "add" v2, v0, v1
// CHECK-NEXT:   simt.st global[v2 + 0], v1 buffer 0
// CHECK-NEXT:   simt.next ^bb2
// CHECK-NEXT: ^bb2:
// CHECK-NEXT:   simt.alu "mov" v3, 7
// CHECK-NEXT:   simt.exit
// CHECK-NEXT: }
