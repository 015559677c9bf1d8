// Division and remainder become restoring-division loops of machine blocks:
// the block is split at the division (setup, then a loop block of at most
// 16 ops that branches back to itself, then the tail and the ops after);
// a guarded one writes its destination once, under its guard. Constant
// divisors that are powers of two become shifts and masks.
// RUN: qgc-opt %s -p simt-expand-divrem | filecheck %s
// RUN: qgc-opt %s -p 'simt-expand-divrem{max-ops=12}' | filecheck %s --check-prefix=SMALL
// RUN: qgc-opt %s -p 'simt-expand-divrem{regs=5}' | filecheck %s --check-prefix=REGS

builtin.module {
  simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.ld v1, param[1]
    simt.special v2, "tid.x"
    simt.alu "div.u" v3, v1, v2
    simt.setp "ne" vp0, v3, 0
    simt.alu "rem.s" v3, v1, v2 guard vp0
    simt.st global[v0 + 0], v3 buffer 0
    simt.st global[v0 + 1], v2 buffer 0
    simt.exit
  }
  simt.kernel @by_constant(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.alu "mov" v2, 8
    simt.alu "div.u" v3, v1, v2
    simt.alu "rem.s" v4, v1, -4
    simt.alu "div.s" v5, v1, 0 guard vp0
    simt.st global[v0 + 0], v3 buffer 0
    simt.st global[v0 + 1], v4 buffer 0
    simt.st global[v0 + 2], v5 buffer 0
    simt.exit
  }
}

// div.u, unguarded: the quotient is built in its destination. Setup: the
// partial remainder, d << 1 and d << 2 saturated to all ones, the counter.
// CHECK:      simt.kernel @k
// CHECK:        simt.special v2, "tid.x"
// CHECK-NEXT:   simt.alu "mov" v3, v1
// CHECK-NEXT:   simt.alu "mov" [[W:v[0-9]+]], 0
// CHECK-NEXT:   simt.alu "shl" [[D1:v[0-9]+]], v2, 1
// CHECK-NEXT:   simt.setp "lt.s" [[P:vp[0-9]+]], v2, 0
// CHECK-NEXT:   simt.alu "mov" [[D1]], -1 guard [[P]]
// CHECK-NEXT:   simt.alu "shl" [[D2:v[0-9]+]], [[D1]], 1
// CHECK-NEXT:   simt.setp "lt.s" [[P]], [[D1]], 0
// CHECK-NEXT:   simt.alu "mov" [[D2]], -1 guard [[P]]
// CHECK-NEXT:   simt.alu "mov" [[C:v[0-9]+]], 10
// CHECK-NEXT:   simt.next ^[[LOOP:bb[0-9]+]]
// Ten iterations of three quotient bits, 15 ops each.
// CHECK-NEXT: ^[[LOOP]]:
// CHECK-NEXT:   simt.alu "shr.u" [[T:v[0-9]+]], v3, 29
// CHECK-NEXT:   simt.alu "shl" [[W]], [[W]], 3
// CHECK-NEXT:   simt.alu "or" [[W]], [[W]], [[T]]
// CHECK-NEXT:   simt.alu "shl" v3, v3, 3
// CHECK-NEXT:   simt.setp "ge.u" [[P]], [[W]], [[D2]]
// CHECK-NEXT:   simt.alu "sub" [[W]], [[W]], [[D2]] guard [[P]]
// CHECK-NEXT:   simt.alu "or" v3, v3, 4 guard [[P]]
// CHECK-NEXT:   simt.setp "ge.u" [[P]], [[W]], [[D1]]
// CHECK-NEXT:   simt.alu "sub" [[W]], [[W]], [[D1]] guard [[P]]
// CHECK-NEXT:   simt.alu "or" v3, v3, 2 guard [[P]]
// CHECK-NEXT:   simt.setp "ge.u" [[P]], [[W]], v2
// CHECK-NEXT:   simt.alu "sub" [[W]], [[W]], v2 guard [[P]]
// CHECK-NEXT:   simt.alu "or" v3, v3, 1 guard [[P]]
// CHECK-NEXT:   simt.alu "sub" [[C]], [[C]], 1
// CHECK-NEXT:   simt.setp "ne" [[P]], [[C]], 0
// CHECK-NEXT:   simt.branch [[P]], ^[[LOOP]], ^[[TAIL:bb[0-9]+]]
// The last two bits compare w >> j with d (exact for any window).
// CHECK-NEXT: ^[[TAIL]]:
// CHECK-NEXT:   simt.alu "shr.u" [[T]], v3, 30
// CHECK-NEXT:   simt.alu "shl" [[W]], [[W]], 2
// CHECK-NEXT:   simt.alu "or" [[W]], [[W]], [[T]]
// CHECK-NEXT:   simt.alu "shl" v3, v3, 2
// CHECK-NEXT:   simt.alu "shr.u" [[T]], [[W]], 1
// CHECK-NEXT:   simt.setp "ge.u" [[P]], [[T]], v2
// CHECK-NEXT:   simt.alu "sub" [[W]], [[W]], [[D1]] guard [[P]]
// CHECK-NEXT:   simt.alu "or" v3, v3, 2 guard [[P]]
// CHECK-NEXT:   simt.setp "ge.u" [[P]], [[W]], v2
// CHECK-NEXT:   simt.alu "sub" [[W]], [[W]], v2 guard [[P]]
// CHECK-NEXT:   simt.alu "or" v3, v3, 1 guard [[P]]
// rem.s, guarded: magnitudes (v1 dies here, so it is negated in place), six
// iterations of five bits (no quotient bits to keep), the dividend's sign,
// then the one guarded write of v3.
// CHECK-NEXT:   simt.setp "ne" vp0, v3, 0
// CHECK-NEXT:   simt.setp "lt.s" [[PA:vp[0-9]+]], v1, 0
// CHECK-NEXT:   simt.setp "lt.s" [[PB:vp[0-9]+]], v2, 0
// CHECK-NEXT:   simt.alu "mov" [[UD:v[0-9]+]], v2
// CHECK-NEXT:   simt.alu "neg" [[UD]], v2 guard [[PB]]
// CHECK-NEXT:   simt.alu "neg" v1, v1 guard [[PA]]
// CHECK-NEXT:   simt.alu "mov" [[R:v[0-9]+]], 0
// CHECK-COUNT-12: simt.
// CHECK-NEXT:   simt.alu "mov" [[C2:v[0-9]+]], 6
// CHECK-NEXT:   simt.next ^[[LOOP2:bb[0-9]+]]
// CHECK-NEXT: ^[[LOOP2]]:
// CHECK-NEXT:   simt.alu "shr.u" [[T2:v[0-9]+]], v1, 27
// CHECK-NEXT:   simt.alu "shl" [[R]], [[R]], 5
// CHECK-NEXT:   simt.alu "or" [[R]], [[R]], [[T2]]
// CHECK-NEXT:   simt.alu "shl" v1, v1, 5
// CHECK-COUNT-10: simt.
// CHECK-NEXT:   simt.alu "sub" [[C2]], [[C2]], 1
// CHECK-NEXT:   simt.setp "ne" [[P2:vp[0-9]+]], [[C2]], 0
// CHECK-NEXT:   simt.branch [[P2]], ^[[LOOP2]], ^[[TAIL2:bb[0-9]+]]
// CHECK-NEXT: ^[[TAIL2]]:
// CHECK-COUNT-8: simt.
// CHECK-NEXT:   simt.alu "neg" [[R]], [[R]] guard [[PA]]
// CHECK-NEXT:   simt.alu "mov" v3, [[R]] guard vp0
// CHECK-NEXT:   simt.st global[v0 + 0], v3 buffer 0
// CHECK-NEXT:   simt.st global[v0 + 1], v2 buffer 0
// CHECK-NEXT:   simt.exit

// CHECK:      simt.kernel @by_constant
// CHECK:        simt.alu "mov" v2, 8
// CHECK-NEXT:   simt.alu "shr.u" v3, v1, 3
// CHECK-NEXT:   simt.alu "shr.s" [[B:v[0-9]+]], v1, 31
// CHECK-NEXT:   simt.alu "shr.u" [[B]], [[B]], 30
// CHECK-NEXT:   simt.alu "add" [[B]], v1, [[B]]
// CHECK-NEXT:   simt.alu "and" [[B]], [[B]], -4
// CHECK-NEXT:   simt.alu "sub" v4, v1, [[B]]
// CHECK-NEXT:   simt.alu "mov" v5, -1 guard vp0
// CHECK-NEXT:   simt.st global[v0 + 0], v3 buffer 0
// CHECK-NOT:  simt.branch

// With 12 ops per block a division takes two bits per iteration.
// SMALL:      simt.alu "mov" [[C:v[0-9]+]], 15
// SMALL-NEXT: simt.next ^[[LOOP:bb[0-9]+]]
// SMALL-NEXT: ^[[LOOP]]:
// SMALL-NEXT: simt.alu "shr.u" [[T:v[0-9]+]], v3, 30
// SMALL-COUNT-9: simt.
// SMALL-NEXT: simt.alu "sub" [[C]], [[C]], 1
// SMALL-NEXT: simt.setp "ne" [[P:vp[0-9]+]], [[C]], 0
// SMALL-NEXT: simt.branch [[P]], ^[[LOOP]]

// With no register to spare, d << 1 is shifted where it is needed (and
// compared as w >> 1 against d), which leaves room for two bits.
// REGS:      simt.alu "mov" v3, v1
// REGS-NEXT: simt.alu "mov" [[W:v[0-9]+]], 0
// REGS-NEXT: simt.alu "mov" [[C:v[0-9]+]], 15
// REGS-NEXT: simt.next ^[[LOOP:bb[0-9]+]]
// REGS-NEXT: ^[[LOOP]]:
// REGS-COUNT-4: simt.
// REGS-NEXT: simt.alu "shr.u" [[T:v[0-9]+]], [[W]], 1
// REGS-NEXT: simt.setp "ge.u" [[P:vp[0-9]+]], [[T]], v2
// REGS-NEXT: simt.alu "shl" [[T]], v2, 1
// REGS-NEXT: simt.alu "sub" [[W]], [[W]], [[T]] guard [[P]]
// REGS-NEXT: simt.alu "or" v3, v3, 2 guard [[P]]
