// Local value numbering: a pure op that recomputes an earlier op's value (the
// same opcode and sources, commuted where the opcode commutes, under the same
// guard) becomes a copy, later sources read through copies made under their
// own guard, and ops whose result nobody reads go.
// RUN: qgc-opt %s -p simt-cse | filecheck %s
// Numbering twice changes nothing more.
// RUN: qgc-opt %s -p simt-cse,simt-cse | filecheck %s

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.setp "ge.u" vp0, v1, 3
    simt.ld v2, global[v0 + 0] buffer 0 guard !vp0
    simt.ld v3, global[v0 + 1] buffer 0 guard !vp0
    simt.alu "mul.hi.u" v4, v2, v3 guard !vp0
    simt.alu "mov" v5, v3 guard !vp0
    simt.alu "mov" v6, v2 guard !vp0
    simt.alu "mul.hi.u" v7, v5, v6 guard !vp0
    simt.alu "mul.hi.u" v8, v2, v3
    simt.alu "sub" v9, v2, v3 guard !vp0
    simt.alu "sub" v10, v3, v2 guard !vp0
    simt.alu "add" v11, v7, v8
    simt.alu "add" v11, v11, v9
    simt.alu "add" v11, v11, v10
    simt.alu "mov" v11, v11
    simt.st global[v0 + 2], v11 buffer 0
    simt.alu "mov" v12, v5 guard !vp0
    simt.alu "mov" v12, v12
    simt.alu "sub" v2, v2, 1 guard !vp0
    simt.alu "sub" v13, v2, v3 guard !vp0
    simt.st global[v0 + 3], v13 buffer 0
    simt.exit
  }
}

// v5, v6 copy v3, v2 under !vp0, so v7 = hi(v5, v6) is hi(v2, v3) = v4 (the
// product commutes): a copy; v11 runs unguarded, where that copy does not hold,
// so it reads v7 still; v8 runs unguarded: another value; sub does not commute;
// nothing reads v5, v6 or v12; after v2's redefinition v2 - v3 is new
// CHECK-LABEL: simt.kernel @k
// CHECK:        simt.ld v3, global[v0 + 1] buffer 0 guard !vp0
// CHECK-NEXT:   simt.alu "mul.hi.u" v4, v2, v3 guard !vp0
// CHECK-NEXT:   simt.alu "mov" v7, v4 guard !vp0
// CHECK-NEXT:   simt.alu "mul.hi.u" v8, v2, v3
// CHECK-NEXT:   simt.alu "sub" v9, v2, v3 guard !vp0
// CHECK-NEXT:   simt.alu "sub" v10, v3, v2 guard !vp0
// CHECK-NEXT:   simt.alu "add" v11, v7, v8
// CHECK-NEXT:   simt.alu "add" v11, v11, v9
// CHECK-NEXT:   simt.alu "add" v11, v11, v10
// CHECK-NEXT:   simt.st global[v0 + 2], v11 buffer 0
// CHECK-NEXT:   simt.alu "sub" v2, v2, 1 guard !vp0
// CHECK-NEXT:   simt.alu "sub" v13, v2, v3 guard !vp0
// CHECK-NEXT:   simt.st global[v0 + 3], v13 buffer 0
// CHECK-NEXT:   simt.exit
