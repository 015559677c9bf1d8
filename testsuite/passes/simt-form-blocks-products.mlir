// Split blocks by products of two registers: a mul.lo and a mul.hi of the
// same factors (mul.wide) count once, a product by a constant not at all.
// RUN: qgc-opt %s -p 'simt-form-blocks{max-products=1}' | filecheck %s
// RUN: qgc-opt %s -p 'simt-form-blocks' | filecheck %s --check-prefix=ANY

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.alu "mul.lo" v2, v0, v1
    simt.alu "mul.hi.u" v3, v1, v0
    simt.alu "mul.lo" v4, v0, 3
    simt.alu "mad.lo" v5, v2, v3, v4
    simt.alu "mul.hi.s" v6, v0, v0
    simt.st global[v5 + 0], v6 buffer 0
    simt.exit
  }
}

// CHECK:      simt.alu "mul.lo" v2, v0, v1
// CHECK-NEXT: simt.alu "mul.hi.u" v3, v1, v0
// CHECK-NEXT: simt.alu "mul.lo" v4, v0, 3
// CHECK-NEXT: simt.next ^bb1
// CHECK-NEXT: ^bb1:
// CHECK-NEXT: simt.alu "mad.lo" v5, v2, v3, v4
// CHECK-NEXT: simt.next ^bb2
// CHECK-NEXT: ^bb2:
// CHECK-NEXT: simt.alu "mul.hi.s" v6, v0, v0
// CHECK-NEXT: simt.st global[v5 + 0], v6 buffer 0
// CHECK-NEXT: simt.exit

// ANY-NOT:    simt.next
