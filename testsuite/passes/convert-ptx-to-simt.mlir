// Instruction selection: virtual registers, param loads, 64-bit addresses narrowed
// to word addresses with their provenance, the guard branch kept as simt.branch.
// RUN: qgc-opt %s -p convert-ptx-to-simt | filecheck %s

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.param "k_param_0" "u64"
      ptx.param "k_param_1" "u32"
      ptx.reg "%r" "b32"<4>
      ptx.reg "%rd" "b64"<6>
      ptx.reg "%p" "pred"<2>
      ptx.inst "ld.param.u64" ["%rd1", "[k_param_0]"]
      ptx.inst "ld.param.u32" ["%r1", "[k_param_1]"]
      ptx.inst "mov.u32" ["%r2", "%tid.x"]
      ptx.inst "setp.ge.u32" ["%p1", "%r2", "%r1"]
      ptx.inst guard "%p1" "bra" ["$L__BB0_2"]
      ptx.inst "cvta.to.global.u64" ["%rd2", "%rd1"]
      ptx.inst "mul.wide.u32" ["%rd3", "%r2", "8"]
      ptx.inst "add.s64" ["%rd4", "%rd2", "%rd3"]
      ptx.inst "ld.global.u32" ["%r3", "[%rd4+4]"]
      ptx.inst "atom.global.add.u32" ["%r3", "[%rd2]", "%r3"]
      ptx.inst "st.global.u32" ["[%rd4]", "%r3"]
      ptx.label "$L__BB0_2"
      ptx.inst "ret" []
    }
  }
}

// CHECK:      simt.kernel @k(ptr k_param_0, u32 k_param_1) lanes 4 mem_words 1024 {
// CHECK-NEXT:   simt.ld v0, param[0]
// CHECK-NEXT:   simt.ld v1, param[1]
// CHECK-NEXT:   simt.special v2, "tid.x"
// CHECK-NEXT:   simt.setp "ge.u" vp0, v2, v1
// CHECK-NEXT:   simt.branch vp0, ^bb2, ^bb1
// CHECK-NEXT: ^bb1:
// CHECK-NEXT:   simt.alu "shl" [[OFF:v[0-9]+]], v2, 1
// CHECK-NEXT:   simt.alu "add" [[PTR:v[0-9]+]], v0, [[OFF]]
// CHECK-NEXT:   simt.ld [[X:v[0-9]+]], global[[[PTR]] + 1] buffer 0
// CHECK-NEXT:   simt.atom "add" [[X]], global[v0 + 0], [[X]] buffer 0
// CHECK-NEXT:   simt.st global[[[PTR]] + 0], [[X]] buffer 0
// CHECK-NEXT:   simt.next ^bb2
// CHECK-NEXT: ^bb2:
// CHECK-NEXT:   simt.exit
// CHECK-NOT:  ptx.
