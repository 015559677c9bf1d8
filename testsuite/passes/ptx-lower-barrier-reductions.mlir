// `bar.red` (__syncthreads_count/_or/_and) becomes `bar.sync 0` around a
// shared counter: each thread adds its part, all read the count between two
// barriers, then take their part back (the counter is 0 again for the next).
// `and` counts the threads whose predicate is false; a negated predicate
// swaps the parts.
// RUN: qgc-opt %s -p ptx-lower-barrier-reductions | filecheck %s

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.reg "%p" "pred"<3>
      ptx.reg "%r" "b32"<2>
      ptx.inst "bar.red.popc.u32" ["%r1", "0", "%p1"]
      ptx.inst "bar.red.and.pred" ["%p2", "0", "!%p1"]
      ptx.inst "ret" []
    }
  }
}

// CHECK:      ptx.entry "visible" @k {
// CHECK-NEXT:   ptx.var "shared" "u32" @__qgc_bar_red_count [1] align 4
// CHECK-NEXT:   ptx.reg "%qgc_bar_red_t" "b32"
// CHECK-NEXT:   ptx.reg "%qgc_bar_red_n" "b32"
// CHECK:        ptx.inst "selp.u32" ["%qgc_bar_red_t", "1", "0", "%p1"]
// CHECK-NEXT:   ptx.inst "red.shared.add.u32" ["[__qgc_bar_red_count]", "%qgc_bar_red_t"]
// CHECK-NEXT:   ptx.inst "bar.sync" ["0"]
// CHECK-NEXT:   ptx.inst "ld.shared.u32" ["%qgc_bar_red_n", "[__qgc_bar_red_count]"]
// CHECK-NEXT:   ptx.inst "bar.sync" ["0"]
// CHECK-NEXT:   ptx.inst "sub.u32" ["%qgc_bar_red_t", "0", "%qgc_bar_red_t"]
// CHECK-NEXT:   ptx.inst "red.shared.add.u32" ["[__qgc_bar_red_count]", "%qgc_bar_red_t"]
// CHECK-NEXT:   ptx.inst "mov.u32" ["%r1", "%qgc_bar_red_n"]
// CHECK-NEXT:   ptx.inst "selp.u32" ["%qgc_bar_red_t", "1", "0", "%p1"]
// CHECK:        ptx.inst "setp.eq.u32" ["%p2", "%qgc_bar_red_n", "0"]
// CHECK-NEXT:   ptx.inst "ret" []
// CHECK-NOT:    bar.red
