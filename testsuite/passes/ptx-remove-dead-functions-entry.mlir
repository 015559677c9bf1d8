// With `entry` (a launch's kernel) the module's other entries are dead too,
// with the functions only they call; an entry the module lacks keeps them all.
// RUN: qgc-opt %s -p 'ptx-remove-dead-functions{entry=b}' | filecheck %s
// RUN: qgc-opt %s -p 'ptx-remove-dead-functions{entry=nope}' | filecheck %s --check-prefix=ALL

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.func "" @only_a_calls {
      ptx.inst "ret" []
    }
    ptx.func "" @b_calls {
      ptx.inst "ret" []
    }
    ptx.entry "visible" @a {
      ptx.inst "call.uni" ["only_a_calls"]
      ptx.inst "ret" []
    }
    ptx.entry "visible" @b {
      ptx.inst "call.uni" ["b_calls"]
      ptx.inst "ret" []
    }
  }
}

// CHECK-NOT:  @only_a_calls
// CHECK:      ptx.func "" @b_calls
// CHECK-NOT:  ptx.entry "visible" @a
// CHECK:      ptx.entry "visible" @b

// ALL:        ptx.func "" @only_a_calls
// ALL:        ptx.func "" @b_calls
// ALL:        ptx.entry "visible" @a
// ALL:        ptx.entry "visible" @b
