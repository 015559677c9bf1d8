"""The machine inside the model, as its compilers, engines and host all see it.

- `opcodes`: the table of the machine's opcodes (arity, folding, semantics,
  circuit);
- `abi`: the launch's contract with a kernel: which kernel a launch picks,
  where its data lives in the machine memory (parameter area, bounds pairs,
  buffers, the CTAs' shared windows, the threads' spill slots), how an element
  is encoded in words, how many banks the memory takes, and the warp shuffle's
  lane rule;
- `shared_window`: where a CTA's `.shared` variables are placed (the
  `simt-layout-memory` pass and the `simt` engine apply it);
- `warps`: the warps of a launch and the residency of CTAs in the machine's
  warp slots, which the `simt` engine and the host schedule by.
"""
