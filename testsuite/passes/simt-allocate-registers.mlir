// Linear scan: a destination takes the register of a source that dies there; a
// guarded write to a fresh register does not keep it alive before.
// RUN: qgc-opt %s -p simt-allocate-registers | filecheck %s
// With one register, spilling cannot help: simt.setp reads two at once.
// RUN: qgc-opt %s -p 'simt-allocate-registers{regs=1}' --verify-diagnostics

builtin.module {
  // expected-error@+1 {{even after spilling, the machine has 1 (option regs)}}
  simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.ld v1, param[1]
    simt.special v2, "tid.x"
    simt.setp "ge.s" vp0, v2, v1
    simt.alu "add" v3, v0, v2 guard !vp0
    simt.st global[v3 + 0], v2 buffer 0 guard !vp0
    simt.exit
  }
}

// CHECK:      simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 regs 15 preds 8 {
// CHECK-NEXT:   simt.ld r0, param[0]
// CHECK-NEXT:   simt.ld r1, param[1]
// CHECK-NEXT:   simt.special r2, "tid.x"
// CHECK-NEXT:   simt.setp "ge.s" p0, r2, r1
// CHECK-NEXT:   simt.alu "add" r0, r0, r2 guard !p0
// CHECK-NEXT:   simt.st global[r0 + 0], r2 buffer 0 guard !p0
// CHECK-NEXT:   simt.exit
