// atomicAdd on a double (atom/red .add.f64) becomes a compare-and-swap loop
// of 64-bit ops: load the word, add in f64 (round to nearest even), swap
// where the word is still the one loaded, else again with what was there;
// the atom's result is the value its swap replaced. A guarded one is refused.
// RUN: not qgc-opt %s -p ptx-expand-f64-atomics --split-input-file 2>&1 | filecheck %s

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.reg "%rd" "b64"<2>
      ptx.reg "%fd" "f64"<3>
      ptx.inst "atom.global.add.f64" ["%fd2", "[%rd1+8]", "%fd1"]
      ptx.inst "red.shared.add.f64" ["[%rd0]", "0d3FF0000000000000"]
      ptx.inst "ret" []
    }
  }
}

// CHECK:      ptx.entry "visible" @k {
// CHECK-NEXT:   ptx.reg "%qgc_fa" "b64"<3>
// CHECK-NEXT:   ptx.reg "%qgc_ff" "f64"<2>
// CHECK-NEXT:   ptx.reg "%qgc_fp" "pred"<1>
// CHECK:        ptx.inst "ld.global.b64" ["%qgc_fa0", "[%rd1+8]"]
// CHECK-NEXT:   ptx.label "$qgc_f64_add_0"
// CHECK-NEXT:   ptx.inst "mov.b64" ["%qgc_ff0", "%qgc_fa0"]
// CHECK-NEXT:   ptx.inst "add.rn.f64" ["%qgc_ff1", "%qgc_ff0", "%fd1"]
// CHECK-NEXT:   ptx.inst "mov.b64" ["%qgc_fa1", "%qgc_ff1"]
// CHECK-NEXT:   ptx.inst "atom.global.cas.b64" ["%qgc_fa2", "[%rd1+8]", "%qgc_fa0", "%qgc_fa1"]
// CHECK-NEXT:   ptx.inst "setp.ne.b64" ["%qgc_fp0", "%qgc_fa2", "%qgc_fa0"]
// CHECK-NEXT:   ptx.inst "mov.b64" ["%qgc_fa0", "%qgc_fa2"]
// CHECK-NEXT:   ptx.inst guard "%qgc_fp0" "bra" ["$qgc_f64_add_0"]
// CHECK-NEXT:   ptx.inst "mov.b64" ["%fd2", "%qgc_fa2"]
// CHECK-NEXT:   ptx.inst "ld.shared.b64" ["%qgc_fa0", "[%rd0]"]
// CHECK-NEXT:   ptx.label "$qgc_f64_add_1"
// CHECK:        ptx.inst "add.rn.f64" ["%qgc_ff1", "%qgc_ff0", "0d3FF0000000000000"]
// CHECK:        ptx.inst "atom.shared.cas.b64" ["%qgc_fa2", "[%rd0]", "%qgc_fa0", "%qgc_fa1"]
// CHECK:        ptx.inst guard "%qgc_fp0" "bra" ["$qgc_f64_add_1"]
// CHECK-NEXT:   ptx.inst "ret" []
// CHECK-NOT:    add.f64"

// -----

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @g {
      ptx.reg "%rd" "b64"<2>
      ptx.reg "%fd" "f64"<3>
      ptx.reg "%p" "pred"<1>
      ptx.inst guard "%p0" "atom.global.add.f64" ["%fd2", "[%rd1]", "%fd1"]
      ptx.inst "ret" []
    }
  }
}

// CHECK: error: 'atom.global.add.f64' is not yet supported{{.*}}only an unguarded, relaxed add of a global or shared f64
