// Memory past one head's 127 rows: `mem_words` 254 takes two banks,
// interleaved by the low address bit (word a in row a >> 1 of bank a & 1).
// Every commit writes each bank's head enabled by the record address's bank
// bit and not bit 9 (the launch area and registers), keyed by bits 1..7; a
// memory read is a head per bank, each enabled by its bank bit (and the
// op's enable), merged onto one set of coordinates; a constant address
// (the parameter at word 0, the buffer's bounds pair at words 1 and 2) reads
// its own bank alone. More than sixteen banks is refused.
// RUN: qgc-opt %s -p convert-simt-to-tensor | filecheck %s
// RUN: sed 's/mem_words 254/mem_words 2033/' %s | not qgc-opt -p convert-simt-to-tensor 2>&1 | filecheck %s --check-prefix=TOO-BIG

builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 254 max_blocks 256 max_ops 16 regs 15 preds 8 {
    simt.ld r0, param[0]
    simt.ld r1, global[r0 + 0] buffer 0
    simt.st global[r0 + 1], r1 buffer 0
    simt.exit
  }
}

// CHECK:      tensor.program @k_step
// CHECK:        tensor.memory @[[M0:mem_[0-9]+_b0]] slots 127 width 32
// CHECK-NEXT:   tensor.kv_write @[[M0]][binary %[[KEY:.*]]], %{{.*}} if %[[BANK0:[^ ]*]] :
// CHECK-NEXT:   %{{.*}} = tensor.kv_read @[[M0]][binary %{{.*}}] : !tensor.bits<7> -> !tensor.bits<32>
// CHECK:        tensor.memory @[[M1:mem_[0-9]+_b1]] slots 127 width 32
// CHECK-NEXT:   tensor.kv_write @[[M1]][binary %[[KEY]]], %{{.*}} if %[[BANK1:[^ ]*]] :
// CHECK-NEXT:   %{{.*}} = tensor.kv_read @[[M1]][binary %{{.*}}] : !tensor.bits<7> -> !tensor.bits<32>
// CHECK:        %[[R0:.*]] = tensor.kv_read @mem_{{[0-9]+}}_b0[binary %[[ROW:.*]]] if %{{.*}} :
// CHECK:        %[[R1:.*]] = tensor.kv_read @mem_{{[0-9]+}}_b1[binary %[[ROW]]] if %{{.*}} :
// CHECK-NEXT:   tensor.merge %[[R0]], %[[R1]] : !tensor.bits<32>, !tensor.bits<32> -> !tensor.bits<32>

// TOO-BIG: error: kernel 'k' has 2033 memory words; the tensor level holds 2032 (16 banks of 127; option mem-words of convert-ptx-to-simt)
