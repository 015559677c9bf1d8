// 64-bit div/rem become restoring division: 64 iterations of a loop on
// 64-bit ops, one quotient bit each (the bit shifted out of the remainder
// forces the subtraction); signed operands by their magnitudes, the quotient
// negated where the signs differ and all ones for a zero divisor.
// RUN: qgc-opt %s -p ptx-expand-wide-divrem | filecheck %s

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.reg "%rd" "b64"<4>
      ptx.inst "div.u64" ["%rd3", "%rd1", "%rd2"]
      ptx.inst "rem.s64" ["%rd0", "%rd1", "%rd2"]
      ptx.inst "ret" []
    }
  }
}

// CHECK:      ptx.entry "visible" @k {
// CHECK-NEXT:   ptx.reg "%qgc_dw" "b64"<6>
// CHECK-NEXT:   ptx.reg "%qgc_dp" "pred"<6>
// CHECK-NEXT:   ptx.reg "%qgc_di" "b32"<1>
// CHECK:        ptx.inst "mov.b64" ["%qgc_dw0", "%rd1"]
// CHECK-NEXT:   ptx.inst "mov.b64" ["%qgc_dw1", "%rd2"]
// CHECK-NEXT:   ptx.inst "mov.b64" ["%qgc_dw2", "0"]
// CHECK-NEXT:   ptx.inst "mov.b64" ["%qgc_dw3", "0"]
// CHECK-NEXT:   ptx.inst "mov.u32" ["%qgc_di0", "64"]
// CHECK-NEXT:   ptx.label "$qgc_divide_0"
// CHECK:        ptx.inst "setp.ge.u64" ["%qgc_dp0", "%qgc_dw3", "%qgc_dw1"]
// CHECK-NEXT:   ptx.inst "or.pred" ["%qgc_dp0", "%qgc_dp0", "%qgc_dp1"]
// CHECK:        ptx.inst guard "%qgc_dp0" "bra" ["$qgc_divide_0"]
// CHECK-NEXT:   ptx.inst "mov.b64" ["%rd3", "%qgc_dw2"]
// CHECK:        ptx.inst "setp.lt.s64" ["%qgc_dp2", "%qgc_dw0", "0"]
// CHECK:        ptx.label "$qgc_divide_1"
// CHECK:        ptx.inst "selp.b64" ["%qgc_dw3", "%qgc_dw4", "%qgc_dw3", "%qgc_dp2"]
// CHECK-NEXT:   ptx.inst "mov.b64" ["%rd0", "%qgc_dw3"]
// CHECK-NEXT:   ptx.inst "ret" []
// CHECK-NOT:    div.
