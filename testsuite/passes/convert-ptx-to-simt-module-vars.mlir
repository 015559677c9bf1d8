// Module variables: a `.const` table indexed at run time, a `.global` byte
// table and a `.global` word accessed directly become trailing pointer
// parameters of their names, whose buffers the launch fills from
// `module_vars` (the reference engine's address, the initial bytes; a byte
// table read only in bytes is a `ptr8` buffer, a byte a word); a fixed
// `.const` read stays folded. `mov.u64 %rd, table` loads the parameter's word
// like a pointer parameter's; `[d_total]` reads it through one.
// Extended-precision `mad.lo.cc`/`madc.hi` keep CC.CF in a register of its own.
// RUN: qgc-opt %s -p convert-ptx-to-simt | filecheck %s

builtin.module {
  ptx.module "9.0" "sm_75" 64 {
    ptx.var "const" "b8" @c_lut [8] align 4 init ["7", "0", "0", "0", "253", "255", "255", "255"]
    ptx.var "const" "u32" @c_fixed [] align 4 init ["42"]
    ptx.var "global" "b8" @d_weight [4] align 1 init ["3", "1", "4", "1"]
    ptx.var "global" "u32" @d_total [] align 4
    ptx.entry "visible" @k {
      ptx.param "k_param_0" "u64"
      ptx.reg "%r" "b32"<12>
      ptx.reg "%rd" "b64"<8>
      ptx.inst "ld.param.u64" ["%rd1", "[k_param_0]"]
      ptx.inst "cvta.to.global.u64" ["%rd2", "%rd1"]
      ptx.inst "ld.global.u32" ["%r1", "[%rd2]"]
      ptx.inst "mul.wide.u32" ["%rd3", "%r1", "4"]
      ptx.inst "mov.u64" ["%rd4", "c_lut"]
      ptx.inst "add.s64" ["%rd5", "%rd4", "%rd3"]
      ptx.inst "ld.const.u32" ["%r2", "[%rd5]"]
      ptx.inst "cvt.u64.u32" ["%rd6", "%r1"]
      ptx.inst "mov.u64" ["%rd7", "d_weight"]
      ptx.inst "add.s64" ["%rd7", "%rd7", "%rd6"]
      ptx.inst "ld.global.u8" ["%r3", "[%rd7]"]
      ptx.inst "ld.const.u32" ["%r4", "[c_fixed]"]
      ptx.inst "atom.global.add.u32" ["%r5", "[d_total]", "%r2"]
      ptx.inst "mad.lo.cc.u32" ["%r6", "%r2", "%r3", "%r4"]
      ptx.inst "madc.hi.u32" ["%r7", "%r2", "%r3", "0"]
      ptx.inst "st.global.u32" ["[%rd2+4]", "%r6"]
      ptx.inst "st.global.u32" ["[%rd2+8]", "%r7"]
      ptx.inst "ret" []
    }
  }
}

// CHECK:      simt.kernel @k(ptr k_param_0, ptr c_lut, ptr8 d_weight, ptr d_total)
// CHECK-SAME:   module_vars (c_lut at 0x0 = "07000000fdffffff", d_weight at 0x8000000 = "03010401", d_total at 0x8000004 = zeros 4)
// CHECK:      simt.ld [[LUT:v[0-9]+]], param[1]
// CHECK:      simt.ld {{v[0-9]+}}, global[{{v[0-9]+}} + 0] buffer 1
// CHECK:      simt.ld [[WEIGHT:v[0-9]+]], param[2]
// CHECK:      simt.ld {{v[0-9]+}}, global[{{v[0-9]+}} + 0] buffer 2
// The fixed read of c_fixed folds to its value.
// CHECK:      simt.alu "mov" [[FIXED:v[0-9]+]], 42
// CHECK:      simt.ld [[TOTAL:v[0-9]+]], param[3]
// CHECK-NEXT: simt.atom "add" {{v[0-9]+}}, global[[[TOTAL]] + 0], {{v[0-9]+}} buffer 3
// mad.lo.cc: the low product plus c, its carry-out into the flag;
// madc.hi: the high product plus 0 plus the flag.
// CHECK:      simt.alu "mul.lo" [[LO:v[0-9]+]]
// CHECK-NEXT: simt.alu "add" [[SUM:v[0-9]+]], [[LO]], [[FIXED]]
// CHECK-NEXT: simt.setp "lt.u" [[C:vp[0-9]+]], [[SUM]], [[FIXED]]
// CHECK-NEXT: simt.alu "selp" [[FLAG:v[0-9]+]], 1, 0, [[C]]
// CHECK:      simt.alu "mul.hi.u" [[HI:v[0-9]+]]
// CHECK-NEXT: simt.alu "add" {{v[0-9]+}}, [[HI]], [[FLAG]]
