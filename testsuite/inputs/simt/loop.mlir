builtin.module {
  simt.kernel @k(u32 n) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.alu "mov" v1, 0
    simt.next ^bb1
  ^bb1:
    simt.alu "add" v1, v1, 1
    simt.setp "lt.s" vp0, v1, v0
    simt.branch vp0, ^bb1, ^bb2 loc("loop.ptx":9:3)
  ^bb2:
    simt.exit
  }
}
