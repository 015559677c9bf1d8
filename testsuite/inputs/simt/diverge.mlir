builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.special v0, "tid.x"
    simt.ld v1, param[0]
    simt.alu "add" v2, v1, v0
    simt.alu "mov" v3, 1
    simt.setp "eq" vp0, v0, 0
    simt.branch vp0, ^bb1, ^bb3
  ^bb1:
    simt.alu "mov" v3, 0
    simt.alu "mov" v4, 0
    simt.next ^bb2
  ^bb2:
    simt.alu "add" v3, v3, 10
    simt.alu "add" v4, v4, 1
    simt.setp "lt.s" vp1, v4, 3
    simt.branch vp1, ^bb2, ^bb3
  ^bb3:
    simt.st global[v2 + 0], v3 buffer 0
    simt.exit
  }
}
