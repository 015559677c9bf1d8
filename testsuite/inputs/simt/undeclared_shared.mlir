builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 shared_vars (t: 4 align 4) {
    simt.shared_addr v1, "u"
    simt.exit
  }
}
