// A triangle and a diamond become guarded ops; a loop stays a per-lane branch
// (the machine runs it by min-PC), and so does a region already guarded.
// RUN: qgc-opt %s -p simt-if-convert | filecheck %s
// RUN: qgc-opt %inputs/simt/loop.mlir -p simt-if-convert | filecheck %s --check-prefix=LOOP

builtin.module {
  simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 {
    simt.special v0, "tid.x"
    simt.ld v1, param[1]
    simt.setp "ge.s" vp0, v0, v1
    simt.branch vp0, ^bb2, ^bb1
  ^bb1:
    simt.ld v2, param[0]
    simt.st global[v2 + 0], v0 buffer 0
    simt.next ^bb2
  ^bb2:
    simt.setp "eq" vp1, v0, 0
    simt.branch !vp1, ^bb3, ^bb4
  ^bb3:
    simt.alu "mov" v3, 1
    simt.next ^bb5
  ^bb4:
    simt.alu "mov" v3, 2
    simt.next ^bb5
  ^bb5:
    simt.exit
  }
}

// CHECK:      simt.setp "ge.s" vp0, v0, v1
// CHECK-NEXT: simt.ld v2, param[0] guard !vp0
// CHECK-NEXT: simt.st global[v2 + 0], v0 buffer 0 guard !vp0
// CHECK-NEXT: simt.next ^bb1
// CHECK-NEXT: ^bb1:
// CHECK-NEXT: simt.setp "eq" vp1, v0, 0
// CHECK-NEXT: simt.alu "mov" v3, 1 guard !vp1
// CHECK-NEXT: simt.alu "mov" v3, 2 guard vp1
// CHECK-NEXT: simt.next ^bb2
// CHECK-NEXT: ^bb2:
// CHECK-NEXT: simt.exit
// CHECK-NOT:  simt.branch

// LOOP:      ^bb1:
// LOOP-NEXT: simt.alu "add" v1, v1, 1
// LOOP-NEXT: simt.setp "lt.s" vp0, v1, v0
// LOOP-NEXT: simt.branch vp0, ^bb1, ^bb2
