// RUN: qgc-opt %s -p ptx-strip-debug-info | filecheck %s
// RUN: qgc-opt %s -p 'ptx-strip-debug-info{keep_pragmas=true}' | filecheck %s --check-prefix=KEEP

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.file 1 "k.cu"
    ptx.entry "visible" @k {
      ptx.loc 1 3 5
      ptx.pragma "nounroll"
      ptx.inst "ret" []
    }
  }
}

// CHECK:      ptx.entry "visible" @k {
// CHECK-NEXT:   ptx.inst "ret" []
// CHECK-NEXT: }
// CHECK-NOT:  ptx.file

// KEEP:     ptx.pragma "nounroll"
// KEEP-NOT: ptx.loc
