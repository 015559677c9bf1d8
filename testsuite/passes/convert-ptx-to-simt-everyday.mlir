// Instruction selection of everyday idioms (issue 22): the lane's specials
// (%laneid and the lane masks, %warpid), fences and __syncwarp (no ops: the
// machine's order already satisfies them), a vector load split per element, a
// byte store into shared memory (an `ins` atomic on its word), a 32-bit load
// into a 64-bit register (extended), a 64-bit cas (one pair atomic, low:high),
// a generic load through a global pointer, and the halves of a 64-bit register.
// RUN: qgc-opt %s -p convert-ptx-to-simt | filecheck %s

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.var "shared" "b8" @flags [16] align 4
    ptx.entry "visible" @k {
      ptx.param "k_param_0" "u64"
      ptx.reg "%r" "b32"<12>
      ptx.reg "%rd" "b64"<8>
      ptx.inst "ld.param.u64" ["%rd1", "[k_param_0]"]
      ptx.inst "cvta.to.global.u64" ["%rd2", "%rd1"]
      ptx.inst "mov.u32" ["%r1", "%laneid"]
      ptx.inst "mov.u32" ["%r2", "%lanemask_lt"]
      ptx.inst "mov.u32" ["%r3", "%warpid"]
      ptx.inst "membar.gl" []
      ptx.inst "fence.acq_rel.gpu" []
      ptx.inst "bar.warp.sync" ["-1"]
      ptx.inst "ld.global.v2.u32" ["{%r4, %r5}", "[%rd2+8]"]
      ptx.inst "st.shared.u8" ["[flags+5]", "%r1"]
      ptx.inst "ld.global.s32" ["%rd3", "[%rd2]"]
      ptx.inst "atom.global.cas.b64" ["%rd4", "[%rd2+16]", "%rd3", "%rd3"]
      ptx.inst "ld.u32" ["%r6", "[%rd2+4]"]
      ptx.inst "mov.b64" ["{%r7, %r8}", "%rd4"]
      ptx.inst "st.global.u32" ["[%rd2]", "%r7"]
      ptx.inst "st.global.u32" ["[%rd2+4]", "%r2"]
      ptx.inst "st.global.u32" ["[%rd2+8]", "%r3"]
      ptx.inst "ret" []
    }
  }
}

// CHECK:      simt.special v{{[0-9]+}}, "laneid"
// CHECK-NEXT: simt.special v{{[0-9]+}}, "lanemask_lt"
// CHECK-NEXT: simt.special v{{[0-9]+}}, "warpid"
// CHECK-NEXT: simt.ld v{{[0-9]+}}, global[v{{[0-9]+}} + 2] buffer 0
// CHECK-NEXT: simt.ld v{{[0-9]+}}, global[v{{[0-9]+}} + 3] buffer 0
// CHECK-NEXT: simt.shared_addr [[FLAGS:v[0-9]+]], "flags"
// CHECK:      simt.alu "shl" [[MASK:v[0-9]+]], 255, [[SHIFT:v[0-9]+]]
// CHECK-NEXT: simt.atom "ins" v{{[0-9]+}}, shared[v{{[0-9]+}} + 0], v{{[0-9]+}}, [[MASK]]
// CHECK:      simt.ld [[LO:v[0-9]+]], global[v{{[0-9]+}} + 0] buffer 0
// CHECK-NEXT: simt.alu "shr.s" [[HI:v[0-9]+]], [[LO]], 31
// CHECK:      simt.atom "cas" v{{[0-9]+}} : v{{[0-9]+}}, global[v{{[0-9]+}} + 4], {{.*}} buffer 0
// CHECK:      simt.ld v{{[0-9]+}}, global[v{{[0-9]+}} + 1] buffer 0
// CHECK-NOT:  membar
// CHECK:      simt.exit
