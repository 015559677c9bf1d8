// The machine listing prints and parses back (custom and generic forms); what
// the verifier refuses is in invalid.mlir.
// RUN: QGC_ROUNDTRIP
// RUN: QGC_GENERIC_ROUNDTRIP

builtin.module {
  simt.kernel @tiles(u32 n) lanes 4 mem_words 128 shared_vars (tile: 64 align 16, "s$": extern align 4) {
    simt.shared_addr v0, "tile"
    simt.shared_addr v1, "s$" guard vp0
    simt.exit
  }
  simt.kernel @dot(ptr a, ptr b, ptr "$c", u32 n) lanes 4 mem_words 128 max_blocks 32 max_ops 8 regs 15 preds 8 {
    simt.ld r0, param[3]
    simt.special r1, "tid.x"
    simt.setp "ge.s" p0, r1, r0
    simt.alu "selp" r2, r1, -1, p0
    simt.ld r5, global[r4 - 2] buffer 1 guard !p0
    simt.atom "add" r6, global[r7 + 0], 3 buffer 2 guard p0
    simt.pred "and" p1, !p0, 1 guard p0
    simt.atom "cas" r6, global[r7 + 0], r5, -1 buffer 2
    simt.next ^bb1
  ^bb1:
    simt.st global[r4 + 1], r5 buffer 0
    simt.exit
  }
  simt.kernel @chase(ptr nodes) lanes 4 mem_words 128 pointer_values {
    simt.ld r1, global[r2:r3 + 4]
    simt.st global[r2:r3 + 0], r1 guard p0
    simt.atom "min.s" r4:r5, global[r2:r3 + 8], r6:r7
    simt.exit
  }
  simt.kernel @frame(ptr out) lanes 4 mem_words 128 spill_words 1 local_words 4 {
    simt.st local[12], r1
    simt.ld r2, local[r3 - 4] guard p0
    simt.exit
  }
}

// CHECK:      simt.kernel @dot(ptr a, ptr b, ptr "$c", u32 n) lanes 4 mem_words 128 max_blocks 32 max_ops 8 regs 15 preds 8 {
// CHECK-NEXT:   simt.ld r0, param[3]
// CHECK:        simt.alu "selp" r2, r1, -1, p0
// CHECK-NEXT:   simt.ld r5, global[r4 - 2] buffer 1 guard !p0
// CHECK-NEXT:   simt.atom "add" r6, global[r7 + 0], 3 buffer 2 guard p0
// CHECK-NEXT:   simt.pred "and" p1, !p0, 1 guard p0
// CHECK-NEXT:   simt.atom "cas" r6, global[r7 + 0], r5, -1 buffer 2
// CHECK-NEXT:   simt.next ^bb1
// CHECK-NEXT: ^bb1:
// CHECK-NEXT:   simt.st global[r4 + 1], r5 buffer 0

// A located access: a pointer held as a value, low word first.
// CHECK:      simt.kernel @chase(ptr nodes) lanes 4 mem_words 128 pointer_values {
// CHECK-NEXT:   simt.ld r1, global[r2:r3 + 4]
// CHECK-NEXT:   simt.st global[r2:r3 + 0], r1 guard p0
// CHECK-NEXT:   simt.atom "min.s" r4 : r5, global[r2:r3 + 8], r6 : r7

// A thread's .local frame, after its spill slots.
// CHECK:      simt.kernel @frame(ptr out) lanes 4 mem_words 128 spill_words 1 local_words 4 {
// CHECK-NEXT:   simt.st local[12], r1
// CHECK-NEXT:   simt.ld r2, local[r3 - 4] guard p0

// CHECK-GENERIC: "simt.ld"() <{dst = #simt.reg<r5>, space = "global", base = #simt.reg<r4>, offset = -2 : i64, buffer = 1 : i64, guard = #simt.guard<!p0>}> : () -> ()
// CHECK-GENERIC: "simt.ld"() <{dst = #simt.reg<r1>, space = "global", base = #simt.reg<r2>, base_hi = #simt.reg<r3>, offset = 4 : i64}> : () -> ()
