// The ptx verifier on textual IR: the error is at the op's line in this file
// (MLIR's -verify-diagnostics), and qgc says it with the line and a caret.
// RUN: qgc-opt %s --split-input-file --verify-diagnostics
// RUN: sed '/^\/\/ -----/q' %s | not qgc - --emit=ptx 2>&1 | filecheck %s --check-prefix=CARET

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.reg "%r" "b32"<4>
      // expected-error@+1 {{unknown PTX instruction 'frobnicate'}}
      ptx.inst "frobnicate.s32" ["%r1", "%r2"]
      ptx.inst "ret" []
    }
  }
}
// CARET:      <stdin>:11:7: error: unknown PTX instruction 'frobnicate'
// CARET-NEXT: {{^}}      ptx.inst "frobnicate.s32" ["%r1", "%r2"]
// CARET-NEXT: {{^}}      ^

// -----

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.param "k_param_0" "u64"
      ptx.reg "%rd" "b64"<4>
      ptx.inst "ld.param.u64" ["%rd1", "[k_param_9]"] // expected-error {{use of undefined symbol 'k_param_9'}}
    }
  }
}

// -----

builtin.module {
  ptx.module "8.5" "sm_75" 64 {
    ptx.entry "visible" @k {
      ptx.reg "%r" "b32"<4>
      ptx.inst "add.s32" ["%r1", "%r2"] {{ // expected-error {{Expected bare-id or string-literal}}
    }
  }
}
