// Spilling cannot help an op that reads more registers at once than the machine
// has: bfi reads four. The error names the op's location and what it needs.
// RUN: qgc-opt %s -p 'simt-allocate-registers{regs=3}' --verify-diagnostics
// With four, the one value live across it is spilled.
// RUN: qgc-opt %s -p 'simt-allocate-registers{regs=4}' | filecheck %s --check-prefix=FITS

builtin.module {
  // expected-error@+1 {{kernel 'k' needs 4 registers per lane at k.ptx:9:2 even after spilling, the machine has 3 (option regs)}}
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0] loc("k.ptx":3:2)
    simt.special v6, "ctaid.x" loc("k.ptx":3:2)
    simt.special v1, "tid.x" loc("k.ptx":4:2)
    simt.special v2, "ntid.x" loc("k.ptx":5:2)
    simt.alu "add" v3, v1, v2 loc("k.ptx":6:2)
    simt.alu "bfi" v4, v1, v2, v3, v0 loc("k.ptx":9:2)
    simt.alu "add" v5, v0, v1 loc("k.ptx":10:2)
    simt.st global[v5 + 0], v4 buffer 0 loc("k.ptx":11:2)
    simt.st global[v5 + 4], v6 buffer 0 loc("k.ptx":12:2)
    simt.exit
  }
}

// FITS: simt.kernel @k(ptr a) lanes 4 mem_words 128 spill_words 1 regs 4 spilled 1 preds 8 {
