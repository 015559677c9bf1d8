// SSA webs: every virtual register is split into the webs that reaching
// definitions connect, each renamed to a register of its own (numbered in order
// of first appearance). A guarded write keeps the old value on its false lanes,
// so it joins the web of the definitions before it; a loop-carried value stays
// one web; a register read before any write is a web of its own.
// RUN: qgc-opt %s -p simt-rename-webs | filecheck %s
// Renaming twice changes nothing.
// RUN: qgc-opt %s -p simt-rename-webs,simt-rename-webs | filecheck %s
// Webs free the register a value reuses across a hole: 4 registers fit without a spill.
// RUN: qgc-opt %s -p 'simt-allocate-registers{regs=4}' | filecheck %s --check-prefix=HULL
// RUN: qgc-opt %s -p 'simt-rename-webs,simt-allocate-registers{regs=4}' | filecheck %s --check-prefix=WEBS

builtin.module {
  simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.alu "add" v2, v0, v1
    simt.alu "mul.lo" v3, v1, 3
    simt.st global[v2 + 0], v3 buffer 0
    simt.ld v3, param[1]
    simt.setp "lt.u" vp0, v1, v3
    simt.alu "add" v3, v1, 7
    simt.alu "mov" v3, 0 guard vp0
    simt.st global[v2 + 1], v3 buffer 0
    simt.alu "mov" v4, 0
    simt.next ^bb1
  ^bb1:
    simt.alu "add" v4, v4, 1
    simt.alu "add" v5, v4, v6
    simt.setp "lt.u" vp0, v4, 4
    simt.branch vp0, ^bb1, ^bb2
  ^bb2:
    simt.st global[v2 + 2], v5 buffer 0
    simt.exit
  }
  simt.kernel @hole(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v4, "tid.x"
    simt.st global[v0 + 0], v4 buffer 0
    simt.ld v1, global[v0 + 1] buffer 0
    simt.ld v2, global[v0 + 2] buffer 0
    simt.alu "add" v3, v1, v2
    simt.st global[v0 + 3], v3 buffer 0
    simt.alu "mul.lo" v4, v1, v2
    simt.st global[v0 + 4], v4 buffer 0
    simt.exit
  }
}

// v3 holds three values: the product, the parameter, then a sum that a
// guarded mov overwrites on some lanes (one web with the sum)
// CHECK-LABEL: simt.kernel @k
// CHECK:        simt.alu "mul.lo" v3, v1, 3
// CHECK-NEXT:   simt.st global[v2 + 0], v3 buffer 0
// CHECK-NEXT:   simt.ld v4, param[1]
// CHECK-NEXT:   simt.setp "lt.u" vp0, v1, v4
// CHECK-NEXT:   simt.alu "add" v5, v1, 7
// CHECK-NEXT:   simt.alu "mov" v5, 0 guard vp0
// CHECK-NEXT:   simt.st global[v2 + 1], v5 buffer 0
// the counter is one web around the loop; v6 is read before any write (its own
// web, v7); the loop's predicate is a new web, vp1
// CHECK-NEXT:   simt.alu "mov" v6, 0
// CHECK-NEXT:   simt.next ^bb1
// CHECK-NEXT: ^bb1:
// CHECK-NEXT:   simt.alu "add" v6, v6, 1
// CHECK-NEXT:   simt.alu "add" v8, v6, v7
// CHECK-NEXT:   simt.setp "lt.u" vp1, v6, 4
// CHECK-NEXT:   simt.branch vp1, ^bb1, ^bb2
// CHECK-NEXT: ^bb2:
// CHECK-NEXT:   simt.st global[v2 + 2], v8 buffer 0
// CHECK-LABEL: simt.kernel @hole
// CHECK:        simt.special v1, "tid.x"
// CHECK-NEXT:   simt.st global[v0 + 0], v1 buffer 0
// CHECK:        simt.alu "mul.lo" v5, v2, v3
// CHECK-NEXT:   simt.st global[v0 + 4], v5 buffer 0

// HULL: simt.kernel @hole(ptr a) lanes 4 mem_words 128 spill_words 1 regs 4 spilled 1 preds 8
// WEBS: simt.kernel @hole(ptr a) lanes 4 mem_words 128 regs 4 preds 8
