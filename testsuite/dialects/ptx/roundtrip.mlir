// RUN: QGC_ROUNDTRIP
// RUN: QGC_GENERIC_ROUNDTRIP

builtin.module {
  ptx.module "9.0" "sm_75" 64 {
    ptx.var linkage "extern" "shared" "b8" @smem [0] align 16
    ptx.entry "visible" @k directives [".maxntid 128 1 1"] {
      ptx.param "k_param_0" "u64"
      ptx.reg "%r" "b32"<4>
      ptx.reg "%p" "pred"<2>
      ptx.inst "mov.u32" ["%r1", "%tid.x"]
      ptx.inst "setp.lt.u32" ["%p1", "%r1", "2"]
      ptx.inst guard "%p1" "bra" ["$L__BB0_1"]
      ptx.label "$L__BB0_1"
      ptx.inst "ret" []
    }
  }
}

// CHECK:      ptx.var linkage "extern" "shared" "b8" @smem [0] align 16
// CHECK:      ptx.entry "visible" @k directives [".maxntid 128 1 1"] {
// CHECK-NEXT:   ptx.param "k_param_0" "u64"
// CHECK-NEXT:   ptx.reg "%r" "b32"<4>
// CHECK:        ptx.inst guard "%p1" "bra" ["$L__BB0_1"]

// CHECK-GENERIC: "ptx.inst"() <{guard = "%p1", opcode = "bra", args = ["$L__BB0_1"]}>
