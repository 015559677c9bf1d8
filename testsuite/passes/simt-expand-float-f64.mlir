// An f64 program has two result words: selection emits its `.lo` and `.hi`
// opcodes side by side on the same sources, and the pass runs the program
// once for the pair. Two fma pairs share one routine (placed first, after a
// jump to the entry) that returns both words, the site register choosing
// where to go back; f64 to s32 has one word, expanded in place.
// RUN: qgc-opt %s -p simt-expand-float | filecheck %s

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.ld v1, global[v0 + 0] buffer 0
    simt.ld v2, global[v0 + 1] buffer 0
    simt.alu "fma.rn.f64.lo" v3, v1, v2, v1, v2, 0, 1071644672
    simt.alu "fma.rn.f64.hi" v4, v1, v2, v1, v2, 0, 1071644672
    simt.alu "fma.rn.f64.lo" v5, v3, v4, v1, v2, v3, v4
    simt.alu "fma.rn.f64.hi" v6, v3, v4, v1, v2, v3, v4
    simt.alu "cvt.rzi.s32.f64" v7, v5, v6
    simt.st global[v0 + 2], v7 buffer 0
    simt.exit
  }
}

// CHECK:      simt.next ^[[ENTRY:bb[0-9]+]]
// The routine: unpack, the four partial products, ..., both words out.
// CHECK-NEXT: ^[[ROUTINE:bb[0-9]+]]:
// CHECK:      simt.alu "mul.hi.u"
// CHECK:      simt.alu "mov" [[LO:v[0-9]+]], {{v[0-9]+}}
// CHECK-NEXT: simt.alu "mov" [[HI:v[0-9]+]], {{v[0-9]+}}
// CHECK-NEXT: simt.setp "lt.u" [[BACK:vp[0-9]+]], [[SITE:v[0-9]+]], 1
// CHECK-NEXT: simt.branch [[BACK]], ^[[FIRST:bb[0-9]+]], ^[[SECOND:bb[0-9]+]]
// The first call: six argument words, the site, the jump.
// CHECK:      ^[[ENTRY]]:
// CHECK:      simt.alu "mov" {{v[0-9]+}}, 1071644672
// CHECK-NEXT: simt.alu "mov" [[SITE]], 0
// CHECK-NEXT: simt.next ^[[ROUTINE]]
// CHECK:      ^[[FIRST]]:
// CHECK-NEXT: simt.alu "mov" v3, [[LO]]
// CHECK-NEXT: simt.alu "mov" v4, [[HI]]
// CHECK:      simt.alu "mov" [[SITE]], 1
// CHECK-NEXT: simt.next ^[[ROUTINE]]
// CHECK:      ^[[SECOND]]:
// CHECK-NEXT: simt.alu "mov" v5, [[LO]]
// CHECK-NEXT: simt.alu "mov" v6, [[HI]]
// The conversion in place, its one word into v7.
// CHECK:      simt.alu "mov" v7,
// CHECK-NEXT: simt.st global[v0 + 2], v7 buffer 0
// CHECK-NOT:  f64
