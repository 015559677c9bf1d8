// The CTA's shared window: static variables in declaration order at the next
// multiple of their alignment, every extern array at one offset after them
// (`dynamic_shared`, in words). A shared address whose register has one
// definition and serves only as the base of shared accesses folds into them;
// any other becomes a `mov` of the byte offset under its guard.
// RUN: qgc-opt %s -p simt-layout-memory | filecheck %s
// A laid-out kernel is left alone.
// RUN: qgc-opt %s -p simt-layout-memory,simt-layout-memory | filecheck %s
// The tensor level needs the layout.
// RUN: qgc-opt %s -p 'simt-allocate-registers,convert-simt-to-tensor' --verify-diagnostics

builtin.module {
  // expected-error@+1 {{kernel 'k' has .shared variables without a layout; run simt-layout-memory before convert-simt-to-tensor}}
  simt.kernel @k(ptr a) lanes 4 mem_words 128 shared_vars (flag: 4 align 4, tile: 24 align 16, dyn: extern align 8, "s.x": 2 align 4) {
    simt.special v0, "tid.x"
    simt.setp "eq" vp0, v0, 0
    simt.shared_addr v1, "tile"
    simt.st shared[v1 + 4], v0
    simt.ld v2, shared[v1 + 8]
    simt.shared_addr v3, "dyn" guard vp0
    simt.alu "add" v4, v3, 4 guard vp0
    simt.shared_addr v5, "s.x"
    simt.atom "add" v6, shared[v5 + 0], v5
    simt.shared_addr v7, "flag"
    simt.st shared[v7 + 0], v2
    simt.shared_addr v7, "dyn"
    simt.st shared[v7 + 0], v6
    simt.exit
  }
}

// flag 0..4, tile at 16 (align 16) .. 40, s.x at 40 .. 42; the extern arrays at 48
// CHECK:      simt.kernel @k(ptr a) lanes 4 mem_words 128 shared_words 11 dynamic_shared 12 {
// CHECK-NEXT:   simt.special v0, "tid.x"
// CHECK-NEXT:   simt.setp "eq" vp0, v0, 0
// CHECK-NEXT:   simt.st shared[20], v0
// CHECK-NEXT:   simt.ld v2, shared[24]
// CHECK-NEXT:   simt.alu "mov" v3, 48 guard vp0
// CHECK-NEXT:   simt.alu "add" v4, v3, 4 guard vp0
// the atomic also adds the address: no fold
// CHECK-NEXT:   simt.alu "mov" v5, 40
// CHECK-NEXT:   simt.atom "add" v6, shared[v5 + 0], v5
// v7 has two definitions: no fold
// CHECK-NEXT:   simt.alu "mov" v7, 0
// CHECK-NEXT:   simt.st shared[v7 + 0], v2
// CHECK-NEXT:   simt.alu "mov" v7, 48
// CHECK-NEXT:   simt.st shared[v7 + 0], v6
// CHECK-NEXT:   simt.exit
