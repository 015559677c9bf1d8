// Shared memory and barriers: `.shared` variables laid out in the CTA's shared
// window (byte offsets, `shared_words` on the kernel), a shared address from
// `mov.u32 %r, sym` kept in bytes, `[sym+off]` folded to a constant address, and
// `bar.sync 0` ending its block as `simt.barrier`.
// RUN: qgc-opt %s -p convert-ptx-to-simt | filecheck %s

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.param "k_param_0" "u64"
      ptx.var "shared" "b8" @s [16] align 4
      ptx.var "shared" "b8" @t [8] align 4
      ptx.reg "%r" "b32"<6>
      ptx.reg "%rd" "b64"<3>
      ptx.inst "mov.u32" ["%r1", "%tid.x"]
      ptx.inst "mov.u32" ["%r2", "t"]
      ptx.inst "shl.b32" ["%r3", "%r1", "2"]
      ptx.inst "add.s32" ["%r4", "%r2", "%r3"]
      ptx.inst "st.shared.u32" ["[%r4]", "%r1"]
      ptx.inst "bar.sync" ["0"]
      ptx.inst "ld.shared.u32" ["%r5", "[s+12]"]
      ptx.inst "ret" []
    }
  }
}

// CHECK:      simt.kernel @k(ptr k_param_0) lanes 4 mem_words 1024 shared_words 6 {
// CHECK:        simt.alu "mov" v1, 16
// CHECK-NEXT:   simt.alu "shl" v2, v0, 2
// CHECK-NEXT:   simt.alu "add" v3, v1, v2
// CHECK-NEXT:   simt.st shared[v3 + 0], v0
// CHECK-NEXT:   simt.barrier ^bb1
// CHECK-NEXT: ^bb1:
// CHECK-NEXT:   simt.ld v4, shared[12]
// CHECK-NEXT:   simt.exit
