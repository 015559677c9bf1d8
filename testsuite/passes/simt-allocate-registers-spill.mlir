// Spilling with regs=3 (tests/test_spill.py runs both kernels, spilled and not).
// The range that costs least per point it frees goes to a spill slot of the
// lane's own spill area: a reload `simt.ld rT, spill[K]` precedes every op that
// reads it, a store follows every op that writes it, under that op's guard
// (lanes whose guard is false keep the old word); spill code keeps the location
// of the op it serves. The kernel header records the slots and the count.
// RUN: qgc-opt %s -p 'simt-allocate-registers{regs=3}' --print-debuginfo | filecheck %s
// The listing parses back, and allocating it again changes nothing.
// RUN: qgc-opt %s -p 'simt-allocate-registers{regs=3}' | qgc-opt -p simt-allocate-registers | filecheck %s --check-prefix=AGAIN

builtin.module {
  simt.kernel @k(ptr a, u32 n, ptr b) lanes 4 mem_words 128 {
    simt.ld v0, param[0] loc("k.ptx":3:2)
    simt.ld v1, param[1] loc("k.ptx":4:2)
    simt.special v2, "tid.x" loc("k.ptx":5:2)
    simt.setp "ge.s" vp0, v2, v1 loc("k.ptx":6:2)
    simt.alu "mul.lo" v3, v2, 3 loc("k.ptx":7:2)
    simt.alu "add" v3, v3, v1 guard !vp0 loc("k.ptx":8:2)
    simt.alu "mul.lo" v4, v2, v1 loc("k.ptx":9:2)
    simt.alu "add" v5, v4, v1 loc("k.ptx":10:2)
    simt.alu "add" v6, v0, v2 loc("k.ptx":11:2)
    simt.st global[v6 + 0], v5 buffer 0 loc("k.ptx":12:2)
    simt.alu "xor" v7, v3, v2 loc("k.ptx":13:2)
    simt.ld v8, param[2] loc("k.ptx":14:2)
    simt.alu "add" v9, v8, v2 loc("k.ptx":15:2)
    simt.st global[v9 + 0], v7 buffer 2 loc("k.ptx":16:2)
    simt.exit
  }
  // five values live around the loop; the cheapest to spill are a, n and tid
  // (one reload each per trip), not the sum (a reload and a store per trip)
  simt.kernel @loop(ptr a, u32 n) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.ld v1, param[1]
    simt.special v2, "tid.x"
    simt.alu "mov" v3, 0
    simt.alu "mov" v4, 0
    simt.next ^bb1
  ^bb1:
    simt.alu "mad.lo" v3, v4, v2, v3
    simt.alu "add" v4, v4, 1
    simt.setp "lt.u" vp0, v4, v1
    simt.branch vp0, ^bb1, ^bb2
  ^bb2:
    simt.alu "add" v5, v0, v2
    simt.st global[v5 + 0], v3 buffer 0
    simt.exit
  }
}

// v3 is written under a guard: its store keeps the guard; the reload before that
// write is gone, r2 still holds the word just stored.
// CHECK:      simt.kernel @k(ptr a, u32 n, ptr b) lanes 4 mem_words 128 spill_words 2 regs 3 spilled 2 preds 8 {
// CHECK-NEXT:   simt.ld r0, param[0] loc("k.ptx":3:2)
// CHECK-NEXT:   simt.st spill[0], r0 loc("k.ptx":3:2)
// CHECK-NEXT:   simt.ld r0, param[1] loc("k.ptx":4:2)
// CHECK-NEXT:   simt.special r1, "tid.x" loc("k.ptx":5:2)
// CHECK-NEXT:   simt.setp "ge.s" p0, r1, r0 loc("k.ptx":6:2)
// CHECK-NEXT:   simt.alu "mul.lo" r2, r1, 3 loc("k.ptx":7:2)
// CHECK-NEXT:   simt.st spill[1], r2 loc("k.ptx":7:2)
// CHECK-NEXT:   simt.alu "add" r2, r2, r0 guard !p0 loc("k.ptx":8:2)
// CHECK-NEXT:   simt.st spill[1], r2 guard !p0 loc("k.ptx":8:2)
// CHECK-NEXT:   simt.alu "mul.lo" r2, r1, r0 loc("k.ptx":9:2)
// CHECK-NEXT:   simt.alu "add" r0, r2, r0 loc("k.ptx":10:2)
// CHECK-NEXT:   simt.ld r2, spill[0] loc("k.ptx":11:2)
// CHECK-NEXT:   simt.alu "add" r2, r2, r1 loc("k.ptx":11:2)
// CHECK-NEXT:   simt.st global[r2 + 0], r0 buffer 0 loc("k.ptx":12:2)
// CHECK-NEXT:   simt.ld r0, spill[1] loc("k.ptx":13:2)
// CHECK-NEXT:   simt.alu "xor" r0, r0, r1 loc("k.ptx":13:2)
// CHECK-NEXT:   simt.ld r2, param[2] loc("k.ptx":14:2)
// CHECK-NEXT:   simt.alu "add" r1, r2, r1 loc("k.ptx":15:2)
// CHECK-NEXT:   simt.st global[r1 + 0], r0 buffer 2 loc("k.ptx":16:2)
// CHECK-NEXT:   simt.exit

// CHECK:      simt.kernel @loop(ptr a, u32 n) lanes 4 mem_words 128 spill_words 3 regs 3 spilled 3 preds 8 {
// CHECK-NEXT:   simt.ld r0, param[0]
// CHECK-NEXT:   simt.st spill[0], r0
// CHECK-NEXT:   simt.ld r0, param[1]
// CHECK-NEXT:   simt.st spill[1], r0
// CHECK-NEXT:   simt.special r0, "tid.x"
// CHECK-NEXT:   simt.st spill[2], r0
// CHECK-NEXT:   simt.alu "mov" r0, 0
// CHECK-NEXT:   simt.alu "mov" r1, 0
// CHECK-NEXT:   simt.next ^bb1
// CHECK-NEXT: ^bb1:
// CHECK-NEXT:   simt.ld r2, spill[2]
// CHECK-NEXT:   simt.alu "mad.lo" r0, r1, r2, r0
// CHECK-NEXT:   simt.alu "add" r1, r1, 1
// CHECK-NEXT:   simt.ld r2, spill[1]
// CHECK-NEXT:   simt.setp "lt.u" p0, r1, r2
// CHECK-NEXT:   simt.branch p0, ^bb1, ^bb2
// CHECK-NEXT: ^bb2:
// CHECK-NEXT:   simt.ld r1, spill[0]
// CHECK-NEXT:   simt.ld r2, spill[2]
// CHECK-NEXT:   simt.alu "add" r1, r1, r2
// CHECK-NEXT:   simt.st global[r1 + 0], r0 buffer 0
// CHECK-NEXT:   simt.exit

// AGAIN: simt.kernel @k(ptr a, u32 n, ptr b) lanes 4 mem_words 128 spill_words 2 regs 3 spilled 2 preds 8 {
// AGAIN: simt.kernel @loop(ptr a, u32 n) lanes 4 mem_words 128 spill_words 3 regs 3 spilled 3 preds 8 {
