// The final codegen pass: the scheduled step program and its machine become
// one weights.model, one weights.layer per decoder layer (heads and MLP
// neurons used, non-zeros per parameter) and the readout layer last; the
// machine parameters, the GPU vocabulary and the tokens' encoding ride on the
// model. The options are the base config's; errors name what does not fit.
// (The load reads a parameter's address: one read for the warp.)
// RUN: qgc-opt %s -p 'convert-simt-to-tensor,tensor-schedule-layers,convert-tensor-to-weights' | filecheck %s
// RUN: not qgc-opt %s -p 'convert-simt-to-tensor,tensor-schedule-layers,convert-tensor-to-weights{hidden=1024}' 2>&1 | filecheck %s --check-prefix=HIDDEN
// RUN: not qgc-opt %s -p 'convert-simt-to-tensor,tensor-schedule-layers,convert-tensor-to-weights{act=gelu}' 2>&1 | filecheck %s --check-prefix=ACT
// RUN: not qgc-opt %s -p convert-tensor-to-weights 2>&1 | filecheck %s --check-prefix=ONE

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 127 max_blocks 256 max_ops 16 regs 15 preds 8 {
    simt.ld r0, param[0]
    simt.ld r1, global[r0 + 0] buffer 0
    simt.st global[r0 + 1], r1 buffer 0
    simt.exit
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   weights.model @k config {hidden_size = 2048 : i64, intermediate_size = 6144 : i64, linear_num_key_heads = 16 : i64, linear_num_value_heads = 16 : i64, linear_key_head_dim = 128 : i64, linear_value_head_dim = 128 : i64, linear_conv_kernel_dim = 4 : i64} machine {max_blocks = 256 : i64, max_ops = 16 : i64, regs = 15 : i64, preds = 8 : i64, lanes = 4 : i64, mem_words = 127 : i64, layers = 14 : i64, fingerprint = "{{[0-9a-f]+}}"} vocabulary {records = #builtin.int<7>, blocks = #builtin.int<1>, warps = #builtin.int<8>, sites = #builtin.int<2>, ports = {{\[\[\]\]}}} encoding <hidden 2048, inputs 16 (118 bits), set 236> {
// CHECK-NEXT:     weights.layer 0 heads 4 neurons 162 nonzeros <in_proj_qkv 371, in_proj_b 4, in_proj_z 512, out_proj 82, gate_proj 361, up_proj 162, down_proj 199, conv1d 1536, A_log 16, norm 128>
// CHECK:          weights.layer 12 heads 0 neurons 8 nonzeros <gate_proj 26, up_proj 8, down_proj 7, A_log 16, norm 128>
// CHECK-NEXT:     weights.layer 13 readout heads 0 neurons 42 nonzeros <gate_proj 83, up_proj 42, down_proj 82>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NOT:  simt.kernel
// CHECK-NOT:  tensor.program

// HIDDEN: error: tensor program 'k_step' is scheduled for hidden 2048; the config has hidden_size 1024
// ACT: error: the neuron gadget needs SiLU; the config has gelu
// ONE: error: code generation takes one kernel (one simt.kernel and its tensor.program)
