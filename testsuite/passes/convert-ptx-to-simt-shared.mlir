// Shared memory and barriers: `.shared` variables declared on the kernel
// (`shared_vars`), their addresses named by `simt.shared_addr` (in bytes), and
// `bar.sync 0` ending its block as `simt.barrier`; simt-layout-memory then places
// them in the CTA's window (`shared_words`) and folds `[sym+off]` to a constant.
// RUN: qgc-opt %s -p convert-ptx-to-simt | filecheck %s
// RUN: qgc-opt %s -p convert-ptx-to-simt,simt-layout-memory | filecheck %s --check-prefix=LAID

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

// CHECK:      simt.kernel @k(ptr k_param_0) lanes 4 mem_words 1024 shared_vars (s: 16 align 4, t: 8 align 4) {
// CHECK:        simt.shared_addr [[T:v[0-9]+]], "t"
// CHECK-NEXT:   simt.alu "shl" [[OFF:v[0-9]+]], v0, 2
// CHECK-NEXT:   simt.alu "add" [[A:v[0-9]+]], [[T]], [[OFF]]
// CHECK-NEXT:   simt.st shared[[[A]] + 0], v0
// CHECK-NEXT:   simt.barrier ^bb1
// CHECK-NEXT: ^bb1:
// CHECK-NEXT:   simt.shared_addr [[S:v[0-9]+]], "s"
// CHECK-NEXT:   simt.ld {{v[0-9]+}}, shared[[[S]] + 12]
// CHECK-NEXT:   simt.exit

// LAID:      simt.kernel @k(ptr k_param_0) lanes 4 mem_words 1024 shared_words 6 {
// LAID:        simt.alu "mov" [[T:v[0-9]+]], 16
// LAID-NEXT:   simt.alu "shl" [[OFF:v[0-9]+]], v0, 2
// LAID-NEXT:   simt.alu "add" [[A:v[0-9]+]], [[T]], [[OFF]]
// LAID-NEXT:   simt.st shared[[[A]] + 0], v0
// LAID-NEXT:   simt.barrier ^bb1
// LAID-NEXT: ^bb1:
// LAID-NEXT:   simt.ld {{v[0-9]+}}, shared[12]
// LAID-NEXT:   simt.exit
