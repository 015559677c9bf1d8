// RUN: qgc-opt %s -p ptx-remove-dead-functions | filecheck %s

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.func "" @unused {
      ptx.inst "ret" []
    }
    ptx.func "" @called {
      ptx.inst "ret" []
    }
    ptx.entry "visible" @k {
      ptx.inst "call.uni" ["called"]
      ptx.inst "ret" []
    }
  }
}

// CHECK-NOT:  @unused
// CHECK:      ptx.func "" @called
// CHECK:      ptx.entry "visible" @k
