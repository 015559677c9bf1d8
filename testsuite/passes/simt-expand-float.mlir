// Every f32 op becomes its program of integer machine ops (unpack, clz
// normalisation, mul.hi.u, rounding by increment, specials by selects): the
// temporaries are fresh virtual registers, the last op writes the destination
// under the op's guard, constants fold. Integer ops are left alone.
// RUN: qgc-opt %s -p simt-expand-float | filecheck %s

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.ld v1, global[v0 + 0] buffer 0
    simt.ld v2, global[v0 + 1] buffer 0
    simt.setp "lt.f32" vp0, v1, v2
    simt.alu "mul.rn.f32" v3, v1, v2 guard vp0
    simt.alu "neg.f32" v4, v3
    simt.alu "cvt.rzi.s32.f32" v5, v4
    simt.alu "add" v5, v5, 1
    simt.st global[v0 + 2], v5 buffer 0
    simt.exit
  }
}

// CHECK:      simt.ld v2, global[v0 + 1] buffer 0
// A compare: keys, NaN test, the ordered result into vp0.
// CHECK-NEXT: simt.alu "and" [[MA:v[0-9]+]], v1, 2147483647
// CHECK:      simt.pred "and" vp0,
// The product: the normalised significands' high word.
// CHECK:      simt.alu "clz"
// CHECK:      simt.alu "mul.hi.u"
// CHECK:      simt.alu "selp" v3, {{-?[0-9]+}}, {{v[0-9]+}}, {{vp[0-9]+}} guard vp0
// neg is a sign flip.
// CHECK-NEXT: simt.alu "xor" v4, v3, -2147483648
// CHECK:      simt.alu "selp" v5,
// CHECK-NEXT: simt.alu "add" v5, v5, 1
// CHECK-NOT:  f32
