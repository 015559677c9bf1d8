// Instruction selection of the integer menu: predicate logic as simt.pred, an
// atomic compare-and-swap, div/rem and mul.hi, a 64-bit index narrowed back to
// 32 bits (`cvt.u32.u64` of ext(v)·4 is v·4, a shift), and the warp ops (a shuffle with
// its in-range predicate first, a vote, a ballot), bit fields, funnel shifts and byte permutes.
// RUN: qgc-opt %s -p convert-ptx-to-simt | filecheck %s

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.param "k_param_0" "u64"
      ptx.reg "%r" "b32"<7>
      ptx.reg "%rd" "b64"<4>
      ptx.reg "%p" "pred"<5>
      ptx.inst "ld.param.u64" ["%rd1", "[k_param_0]"]
      ptx.inst "cvta.to.global.u64" ["%rd2", "%rd1"]
      ptx.inst "mov.u32" ["%r1", "%tid.x"]
      ptx.inst "setp.eq.s32" ["%p1", "%r1", "0"]
      ptx.inst "setp.gt.u32" ["%p2", "%r1", "2"]
      ptx.inst "or.pred" ["%p3", "%p1", "%p2"]
      ptx.inst "not.pred" ["%p4", "%p3"]
      ptx.inst "div.s32" ["%r2", "%r1", "3"]
      ptx.inst "rem.u32" ["%r3", "%r1", "3"]
      ptx.inst "mul.hi.u32" ["%r4", "%r1", "%r2"]
      ptx.inst "mul.wide.u32" ["%rd3", "%r1", "4"]
      ptx.inst "cvt.u32.u64" ["%r5", "%rd3"]
      ptx.inst "atom.global.cas.b32" ["%r6", "[%rd2]", "%r5", "%r4"]
      ptx.inst "shfl.sync.up.b32" ["%r6|%p1", "%r5", "1", "0", "-1"]
      ptx.inst "vote.sync.any.pred" ["%p2", "%p4", "-1"]
      ptx.inst "vote.sync.ballot.b32" ["%r2", "%p3", "-1"]
      ptx.inst "bfe.u32" ["%r3", "%r1", "4", "8"]
      ptx.inst "bfi.b32" ["%r4", "%r1", "%r3", "8", "4"]
      ptx.inst "shf.l.wrap.b32" ["%r5", "%r3", "%r4", "%r1"]
      ptx.inst "prmt.b32" ["%r5", "%r5", "%r4", "%r1"]
      ptx.inst "prmt.b32.f4e" ["%r5", "%r5", "%r3", "2"]
      ptx.inst "st.global.u32" ["[%rd2]", "%r6"]
      ptx.inst "st.global.u32" ["[%rd2]", "%r5"]
      ptx.inst "ret" []
    }
  }
}

// CHECK:      simt.setp "eq" vp0, v1, 0
// CHECK-NEXT: simt.setp "gt.u" vp1, v1, 2
// CHECK-NEXT: simt.pred "or" vp2, vp0, vp1
// CHECK-NEXT: simt.pred "not" vp3, vp2
// CHECK-NEXT: simt.alu "div.s" v2, v1, 3
// CHECK-NEXT: simt.alu "rem.u" v3, v1, 3
// CHECK-NEXT: simt.alu "mul.hi.u" v4, v1, v2
// CHECK-NEXT: simt.alu "shl" [[R5:v[0-9]+]], v1, 2
// CHECK-NEXT: simt.atom "cas" [[R6:v[0-9]+]], global[v0 + 0], [[R5]], v4 buffer 0
// CHECK-NEXT: simt.warp "shfl.up.p" vp0, 1, 0
// CHECK-NEXT: simt.warp "shfl.up" [[R6]], [[R5]], 1, 0
// CHECK-NEXT: simt.warp "any" vp1, vp3
// CHECK-NEXT: simt.warp "ballot" v2, vp2
// CHECK-NEXT: simt.alu "bfe.u" v3, v1, 4, 8
// CHECK-NEXT: simt.alu "bfi" v4, v1, v3, 8, 4
// CHECK-NEXT: simt.alu "shf.l.wrap" [[R5]], v3, v4, v1
// CHECK-NEXT: simt.alu "prmt" [[R5]], [[R5]], v4, v1
// CHECK-NEXT: simt.alu "prmt.f4e" [[R5]], [[R5]], v3, 2
// CHECK-NEXT: simt.st global[v0 + 0], [[R6]] buffer 0
// CHECK-NEXT: simt.st global[v0 + 0], [[R5]] buffer 0
// CHECK-NEXT: simt.exit
