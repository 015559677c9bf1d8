// tensor.merge: reads of which at most one gives set bits in a token (here
// each read is enabled by one bit of %sel), merged onto one set of residual
// coordinates. With one head per layer the two memories go to different
// layers, yet the scheduler places both reads on the same coordinates (the
// later read writes onto the first one's, −1 unless the first one gave set
// bits). Printed and parsed back (custom and generic forms) it is the same IR
// (what the verifier refuses: merge_errors.mlir).
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=8 heads=1}' | filecheck %s
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=8 heads=1}' | qgc-opt | filecheck %s
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=8 heads=1}' --print-op-generic | qgc-opt | filecheck %s
// RUN: qgc-opt %s -p 'tensor-schedule-layers{hidden=64 intermediate=8 heads=2}' | qgc-opt | filecheck %s --check-prefix=ONE
// RUN: qgc-opt %s | qgc-opt | filecheck %s --check-prefix=PARSE
// RUN: qgc-opt %s --print-op-generic | qgc-opt | filecheck %s --check-prefix=PARSE
// RUN: qgc-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

builtin.module {
  tensor.program @gather {
    %k = tensor.input "k" : !tensor.bits<1>
    %v0 = tensor.input "v0" : !tensor.bits<2>
    %v1 = tensor.input "v1" : !tensor.bits<2>
    %sel = tensor.input "sel" : !tensor.bits<2>
    %s0 = tensor.slice %sel [0, 1) : !tensor.bits<2> -> !tensor.bits<1>
    %s1 = tensor.slice %sel [1, 2) : !tensor.bits<2> -> !tensor.bits<1>
    tensor.memory @m0 slots 1 width 2
    tensor.kv_write @m0[binary %k], %v0 : !tensor.bits<1>, !tensor.bits<2>
    %r0 = tensor.kv_read @m0[binary %k] if %s0 : !tensor.bits<1>, !tensor.bits<1> -> !tensor.bits<2>
    tensor.memory @m1 slots 1 width 2
    tensor.kv_write @m1[binary %k], %v1 : !tensor.bits<1>, !tensor.bits<2>
    %r1 = tensor.kv_read @m1[binary %k] if %s1 : !tensor.bits<1>, !tensor.bits<1> -> !tensor.bits<2>
    %r = tensor.merge %r0, %r1 : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<2>
    %any = tensor.threshold %r [{0 = 1, 1 = 1} >= 1] : !tensor.bits<2> -> !tensor.bits<1>
    tensor.output "r" %r : !tensor.bits<2>
    tensor.output "any" %any : !tensor.bits<1>
  }
}

// Both reads on the same coordinates (captured as RC), in layers 0 and 1 (one
// head each); the merge itself is free (no placement), its consumer comes
// after both reads.
// CHECK:      tensor.program @gather layers 2 hidden 64 intermediate 8 heads 1 {
// CHECK:        tensor.memory @m0 slots 1 width 2 at layer {{[01]}} attn head 0
// CHECK-NEXT:   tensor.kv_write @m0[binary %k], %v0 at layer {{[01]}} attn head 0 : !tensor.bits<1>, !tensor.bits<2>
// CHECK-NEXT:   %r0 = tensor.kv_read @m0[binary %k] if %s0 at layer {{[01]}} attn head 0 coords [[RC:[^:]+]] : !tensor.bits<1>, !tensor.bits<1> -> !tensor.bits<2>
// CHECK-NEXT:   tensor.memory @m1 slots 1 width 2 at layer {{[01]}} attn head 0
// CHECK-NEXT:   tensor.kv_write @m1[binary %k], %v1 at layer {{[01]}} attn head 0 : !tensor.bits<1>, !tensor.bits<2>
// CHECK-NEXT:   %r1 = tensor.kv_read @m1[binary %k] if %s1 at layer {{[01]}} attn head 0 coords [[RC]] : !tensor.bits<1>, !tensor.bits<1> -> !tensor.bits<2>
// CHECK-NEXT:   %r = tensor.merge %r0, %r1 : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<2>
// CHECK-NEXT:   %any = tensor.threshold %r [{0 = 1, 1 = 1} >= 1] at layer 1 mlp neurons
// CHECK-NEXT:   tensor.output "r" %r : !tensor.bits<2>
// CHECK-NEXT:   tensor.output "any" %any : !tensor.bits<1>
// CHECK:        tensor.pad

// Two heads: both memories in layer 0, the reads again on one set of coordinates.
// ONE:      tensor.program @gather layers 1 hidden 64 intermediate 8 heads 2 {
// ONE:        %r0 = tensor.kv_read @m0[binary %k] if %s0 at layer 0 attn head 0 coords [[RC:[^:]+]] :
// ONE:        %r1 = tensor.kv_read @m1[binary %k] if %s1 at layer 0 attn head 1 coords [[RC]] :
// ONE-NEXT:   %r = tensor.merge %r0, %r1 : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<2>

// PARSE:      tensor.program @gather {
// PARSE:        %r0 = tensor.kv_read @m0[binary %k] if %s0 : !tensor.bits<1>, !tensor.bits<1> -> !tensor.bits<2>
// PARSE:        %r1 = tensor.kv_read @m1[binary %k] if %s1 : !tensor.bits<1>, !tensor.bits<1> -> !tensor.bits<2>
// PARSE-NEXT:   %r = tensor.merge %r0, %r1 : !tensor.bits<2>, !tensor.bits<2> -> !tensor.bits<2>
// PARSE-NEXT:   %any = tensor.threshold %r [{0 = 1, 1 = 1} >= 1] : !tensor.bits<2> -> !tensor.bits<1>

// GENERIC: %r = "tensor.merge"(%r0, %r1) : (!tensor.bits<2>, !tensor.bits<2>) -> !tensor.bits<2>

