builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 max_blocks 32 max_ops 2 {
    simt.ld v0, param[0]
    simt.alu "add" v0, v0, 1
    simt.st global[v0 + 0], 5 buffer 0
    simt.exit
  }
}
