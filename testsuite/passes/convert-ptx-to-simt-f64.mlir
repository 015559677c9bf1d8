// Instruction selection of f64 (float code promoted by double literals): a
// double is a register pair; cvt.f64.f32, setp.f64 and cvt.rn.f32.f64 become
// their integer programs in place; fma and add (as fma(a, 1, b)) become the
// fma program's `.lo` and `.hi` opcodes side by side on the same six words;
// f64 to s32 is one opcode on two words; a double stores as two words.
// RUN: qgc-opt %s -p convert-ptx-to-simt | filecheck %s

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.param "k_param_0" "u64"
      ptx.reg "%f" "f32"<4>
      ptx.reg "%fd" "f64"<6>
      ptx.reg "%r" "b32"<4>
      ptx.reg "%rd" "b64"<4>
      ptx.reg "%p" "pred"<2>
      ptx.inst "ld.param.u64" ["%rd1", "[k_param_0]"]
      ptx.inst "cvta.to.global.u64" ["%rd2", "%rd1"]
      ptx.inst "ld.global.f32" ["%f1", "[%rd2]"]
      ptx.inst "cvt.f64.f32" ["%fd1", "%f1"]
      ptx.inst "fma.rn.f64" ["%fd2", "%fd1", "0d3FE0000000000000", "0d3FD0000000000000"]
      ptx.inst "add.f64" ["%fd3", "%fd2", "%fd1"]
      ptx.inst "setp.gt.f64" ["%p1", "%fd3", "0d3FB999999999999A"]
      ptx.inst "selp.f64" ["%fd4", "%fd3", "%fd1", "%p1"]
      ptx.inst "cvt.rn.f32.f64" ["%f2", "%fd4"]
      ptx.inst "cvt.rzi.s32.f64" ["%r1", "%fd4"]
      ptx.inst "st.global.f32" ["[%rd2+4]", "%f2"]
      ptx.inst "st.global.u32" ["[%rd2+8]", "%r1"]
      ptx.inst "st.global.f64" ["[%rd2+16]", "%fd4"]
      ptx.inst "ret" []
    }
  }
}

// CHECK:      simt.ld v1, global[v0 + 0] buffer 0
// cvt.f64.f32: unpack, clz normalisation, rebias by 896, the specials.
// CHECK:      simt.alu "clz"
// CHECK:      simt.alu "add" {{v[0-9]+}}, {{v[0-9]+}}, 896
// CHECK:      simt.alu "mov" [[XLO:v[0-9]+]], {{v[0-9]+}}
// CHECK-NEXT: simt.alu "mov" [[XHI:v[0-9]+]], {{v[0-9]+}}
// 0.5 * x + 0.25, then + x as fma(s, 1.0, x).
// CHECK-NEXT: simt.alu "fma.rn.f64.lo" [[SLO:v[0-9]+]], [[XLO]], [[XHI]], 0, 1071644672, 0, 1070596096
// CHECK-NEXT: simt.alu "fma.rn.f64.hi" [[SHI:v[0-9]+]], [[XLO]], [[XHI]], 0, 1071644672, 0, 1070596096
// CHECK-NEXT: simt.alu "fma.rn.f64.lo" [[TLO:v[0-9]+]], [[SLO]], [[SHI]], 0, 1072693248, [[XLO]], [[XHI]]
// CHECK-NEXT: simt.alu "fma.rn.f64.hi" [[THI:v[0-9]+]], [[SLO]], [[SHI]], 0, 1072693248, [[XLO]], [[XHI]]
// setp.gt.f64 in place, into the predicate; selp.f64 as two selects.
// CHECK:      simt.pred "mov" [[P:vp[0-9]+]], {{vp[0-9]+}}
// CHECK-NEXT: simt.alu "selp" [[DLO:v[0-9]+]], [[TLO]], [[XLO]], [[P]]
// CHECK-NEXT: simt.alu "selp" [[DHI:v[0-9]+]], [[THI]], [[XHI]], [[P]]
// cvt.rn.f32.f64 in place (a sticky bit, float_programs' rounding).
// CHECK:      simt.alu "shf.l.clamp" {{v[0-9]+}}, [[DLO]], {{v[0-9]+}}, 9
// CHECK:      simt.alu "cvt.rzi.s32.f64" [[I:v[0-9]+]], [[DLO]], [[DHI]]
// CHECK-NEXT: simt.st global[v0 + 1], {{v[0-9]+}} buffer 0
// CHECK-NEXT: simt.st global[v0 + 2], [[I]] buffer 0
// CHECK-NEXT: simt.st global[v0 + 4], [[DLO]] buffer 0
// CHECK-NEXT: simt.st global[v0 + 5], [[DHI]] buffer 0
