// fma's product commutes, its addend does not: fma(a, b, c) is shared with
// fma(b, a, c) and not with fma(b, c, a) (regression: every source was sorted,
// so fma(x, 0, y) became a copy of fma(0, y, x); found by the random f32
// programs of tests/test_simt.py: a sqrt of a subnormal added where the
// subnormal was meant).
// RUN: qgc-opt %s -p simt-cse | filecheck %s

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.ld v1, global[v0 + 0] buffer 0
    simt.ld v2, global[v0 + 1] buffer 0
    simt.ld v3, global[v0 + 2] buffer 0
    simt.alu "fma.rn.f32" v4, v1, v2, v3
    simt.alu "fma.rn.f32" v5, v2, v1, v3
    simt.alu "fma.rn.f32" v6, v2, v3, v1
    simt.alu "add" v7, v4, v5
    simt.alu "add" v7, v7, v6
    simt.st global[v0 + 3], v7 buffer 0
    simt.exit
  }
}

// v5 is v4 (its copy read through and swept); v6 stays
// CHECK-LABEL: simt.kernel @k
// CHECK:        simt.alu "fma.rn.f32" v4, v1, v2, v3
// CHECK-NEXT:   simt.alu "fma.rn.f32" v6, v2, v3, v1
// CHECK-NEXT:   simt.alu "add" v7, v4, v4
