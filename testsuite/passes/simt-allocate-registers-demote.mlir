// Demoting predicates with preds=2 (tests/test_demote_predicates.py runs it).
// Three predicates are live at once; the one that costs least per point it
// frees is kept as a 0/1 word: its writer writes a fresh predicate that
// `selp` turns into the word just after, under the writer's guard (lanes whose
// guard is false keep the old word), and each reader, a branch included, gets
// `setp.ne` of the word into a fresh predicate just before. The words are
// 32-bit values like any other; the kernel header counts the demoted.
// RUN: qgc-opt %s -p 'simt-allocate-registers{preds=2}' --print-debuginfo | filecheck %s
// The listing parses back, and allocating it again changes nothing.
// RUN: qgc-opt %s -p 'simt-allocate-registers{preds=2}' | qgc-opt -p simt-allocate-registers | filecheck %s --check-prefix=AGAIN
// An op that reads more predicates than the machine has cannot be helped.
// RUN: not qgc-opt %s -p 'simt-allocate-registers{preds=1}' 2>&1 | filecheck %s --check-prefix=LIMIT

builtin.module {
  simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 {
    simt.ld v0, param[0] loc("k.ptx":3:2)
    simt.ld v1, param[1] loc("k.ptx":4:2)
    simt.special v2, "tid.x" loc("k.ptx":5:2)
    simt.setp "lt.u" vp0, v2, v1 loc("k.ptx":6:2)
    simt.setp "lt.u" vp1, v2, 2 loc("k.ptx":7:2)
    simt.setp "eq" vp2, v2, 3 guard vp1 loc("k.ptx":8:2)
    simt.alu "selp" v3, 7, 9, vp2 loc("k.ptx":9:2)
    simt.alu "add" v3, v3, 1 guard vp1 loc("k.ptx":10:2)
    simt.alu "add" v4, v0, v2 loc("k.ptx":11:2)
    simt.st global[v4 + 0], v3 buffer 0 guard vp0 loc("k.ptx":12:2)
    simt.branch vp0, ^bb1, ^bb2 loc("k.ptx":13:2)
  ^bb1:
    simt.st global[v4 + 0], v2 buffer 0 loc("k.ptx":14:2)
    simt.exit
  ^bb2:
    simt.exit
  }
  simt.kernel @two(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.setp "lt.u" vp0, v1, 2
    simt.setp "gt.u" vp1, v1, 0
    simt.pred "and" vp2, vp0, vp1 loc("two.ptx":7:2)
    simt.alu "selp" v2, 1, 2, vp2
    simt.st global[v0 + 0], v2 buffer 0
    simt.exit
  }
}

// vp0 lives longest and is read least: it becomes r1; vp1 and vp2 stay predicates.
// CHECK:      simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 regs 15 preds 2 demoted 1 {
// CHECK-NEXT:   simt.ld r0, param[0] loc("k.ptx":3:2)
// CHECK-NEXT:   simt.ld r1, param[1] loc("k.ptx":4:2)
// CHECK-NEXT:   simt.special r2, "tid.x" loc("k.ptx":5:2)
// CHECK-NEXT:   simt.setp "lt.u" p0, r2, r1 loc("k.ptx":6:2)
// CHECK-NEXT:   simt.alu "selp" r1, 1, 0, p0 loc("k.ptx":6:2)
// CHECK-NEXT:   simt.setp "lt.u" p0, r2, 2 loc("k.ptx":7:2)
// CHECK-NEXT:   simt.setp "eq" p1, r2, 3 guard p0 loc("k.ptx":8:2)
// CHECK-NEXT:   simt.alu "selp" r3, 7, 9, p1 loc("k.ptx":9:2)
// CHECK-NEXT:   simt.alu "add" r3, r3, 1 guard p0 loc("k.ptx":10:2)
// CHECK-NEXT:   simt.alu "add" r0, r0, r2 loc("k.ptx":11:2)
// CHECK-NEXT:   simt.setp "ne" p0, r1, 0 loc("k.ptx":12:2)
// CHECK-NEXT:   simt.st global[r0 + 0], r3 buffer 0 guard p0 loc("k.ptx":12:2)
// CHECK-NEXT:   simt.setp "ne" p0, r1, 0 loc("k.ptx":13:2)
// CHECK-NEXT:   simt.branch p0, ^bb1, ^bb2 loc("k.ptx":13:2)
// Two predicates fit: nothing to demote, no `demoted`.
// CHECK:      simt.kernel @two(ptr a) lanes 4 mem_words 128 regs 15 preds 2 {
// CHECK:        simt.pred "and" p0, p0, p1

// AGAIN:      simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 regs 15 preds 2 demoted 1 {
// AGAIN:        simt.alu "selp" r1, 1, 0, p0
// AGAIN:        simt.setp "ne" p0, r1, 0

// LIMIT: error: kernel 'two' needs 2 predicate registers per lane at two.ptx:7:2 even after keeping predicates as words, the machine has 1 (option preds)
