#!/usr/bin/env python3
"""Cross-check every example's expected*.json by compiling its CUDA source for the host.

cpu_shim.h maps threadIdx/blockIdx, __syncthreads (std::barrier over one std::thread per
CUDA thread), warp shuffles and votes (a per-warp barrier and slot array; lanes the
block does not have are absent), atomics and the intrinsics the examples use onto C++20.
Each launch.json is turned into a main() that runs the kernel CTA by CTA, for warp size
4 (checked against expected.json) and 32 (expected_warp32.json where present).  It is an
independent check of gen_expected.py's hand-written models; it does not read the PTX.
a * x + y is contracted to an FMA (-ffp-contract=fast -mfma) as nvcc and clang do.

Run: python3 tools/shim_check.py   (needs g++ with C++20 and an x86-64 CPU with FMA)
"""
import json, os, re, shutil, subprocess, sys, tempfile
import numpy as np
TOOLS = os.path.dirname(os.path.abspath(__file__))
E = os.path.dirname(TOOLS)
BUILD = tempfile.mkdtemp(prefix='qgc-shim-')
CXX = os.environ.get('CXX', 'g++')
CT = {'s32':'int','u32':'unsigned','s64':'long long','u64':'unsigned long long','u8':'unsigned char','s8':'signed char','s16':'short','u16':'unsigned short','f32':'float'}
def lit(t, v):
    """An exact C++ literal of type t."""
    if t == 'f32':
        return f'(float){float(np.float32(v)).hex()}'
    return f'({CT[t]}){int(v) & ((1 << 64) - 1)}ull'   # modular conversion, exact for every type
def run(name, ws):
    L = json.load(open(f'{E}/{name}/launch.json'))
    src = re.sub(r'extern __shared__ (\w+) (\w+)\[\];', r'\1 *\2 = (\1 *)dyn_shared;',
                 open(f'{E}/{name}/{name}.cu').read())
    # the inline PTX the examples use: special-register reads and prmt.b32
    src = re.sub(r'asm(?:\s+volatile)?\s*\(\s*"mov\.u32 %0, %%(\w+);"\s*:\s*"=r"\((\w+)\)\s*\)',
                 r'\2 = shim_sreg_\1()', src)
    src = re.sub(r'asm(?:\s+volatile)?\s*\(\s*"prmt\.b32(?:\.(\w+))? %0, %1, %2, %3;"\s*:\s*"=r"\(([^()]+)\)\s*:'
                 r'\s*"r"\((\w+)\),\s*"r"\((\w+)\),\s*"r"\((\w+)\)\s*\)',
                 lambda m: f'{m[2]} = shim_prmt("{m[1] or ""}", {m[3]}, {m[4]}, {m[5]})', src)
    if re.search(r'\basm\s*(volatile\s*)?\(\s*"', src):
        sys.exit(f'{name}: inline asm that shim_check.py does not translate')
    decl, args, prints = [], [], []
    for k, a in enumerate(L['args']):
        t = a['type']
        if t.endswith('*'):
            e = t[:-1]
            decl.append(f'alignas(16) {CT[e]} b{k}[] = {{{", ".join(lit(e, v) for v in a["data"])}}};')
            args.append(f'AnyPtr{{b{k} + {a.get("offset", 0)}}}')
            fmt = '%.9g' if e == 'f32' else ('%lld' if e.startswith('s') else '%llu')
            cast = '(double)' if e == 'f32' else ('(long long)' if e.startswith('s') else '(unsigned long long)')
            prints.append(f'printf("["); for (size_t i = 0; i < sizeof b{k} / sizeof b{k}[0]; ++i) printf(i ? ", {fmt}" : "{fmt}", {cast}b{k}[i]); printf("]");')
        else:
            args.append(lit(t, a['value'])); prints.append('printf("null");')
    g, b = L['grid'], L['block']
    main = f'''
#include "cpu_shim.h"
#include <thread>
#include <cstdio>
{src}
int main() {{
  warpSize = {ws};
  {" ".join(decl)}
  gridDim = {{{g[0]}u, {g[1]}u, {g[2]}u}}; blockDim = {{{b[0]}u, {b[1]}u, {b[2]}u}};
  unsigned nt = {b[0]*b[1]*b[2]};
  for (unsigned bz = 0; bz < gridDim.z; ++bz) for (unsigned by = 0; by < gridDim.y; ++by) for (unsigned bx = 0; bx < gridDim.x; ++bx) {{
    std::barrier<> bar(nt);
    unsigned nw = (nt + warpSize - 1) / warpSize;
    std::vector<std::barrier<>*> wb; std::vector<std::vector<unsigned long long>> slots(nw, std::vector<unsigned long long>(warpSize));
    for (unsigned w = 0; w < nw; ++w) wb.push_back(new std::barrier<>(std::min<unsigned>(warpSize, nt - w * warpSize)));
    std::vector<std::thread> th;
    for (unsigned t = 0; t < nt; ++t) th.emplace_back([&, t] {{
      blockIdx = {{bx, by, bz}};
      threadIdx = {{t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)}};
      blk_bar = &bar; unsigned w = t / warpSize; warp_bar = wb[w]; warp_slots = slots[w].data();
      warp_lanes = std::min<unsigned>(warpSize, nt - w * warpSize);
      {name}({", ".join(args)});
    }});
    for (auto &x : th) x.join();
  }}
  printf("{{\\"buffers\\": [");
  {' printf(", "); '.join(prints)}
  printf("]}}\\n");
}}
'''
    open(f'{BUILD}/{name}.cpp', 'w').write(main)
    subprocess.run([CXX, '-std=c++20', '-O2', '-mfma', '-ffp-contract=fast', '-pthread', '-I' + TOOLS, '-w', f'{BUILD}/{name}.cpp', '-o', f'{BUILD}/{name}'], check=True)
    out = json.loads(subprocess.run([f'{BUILD}/{name}'], capture_output=True, text=True, check=True).stdout)
    # canonical floats
    for k, a in enumerate(L['args']):
        if a['type'] == 'f32*': out['buffers'][k] = [float(np.float32(v)) for v in out['buffers'][k]]
    return out
bad = 0
for name in sorted(os.listdir(E)):
    if not os.path.exists(f'{E}/{name}/launch.json'): continue
    for ws, fn in ((4, 'expected.json'), (32, 'expected_warp32.json')):
        path = f'{E}/{name}/{fn}'
        if not os.path.exists(path): path = f'{E}/{name}/expected.json'
        want = json.load(open(path)); got = run(name, ws)
        ok = got == want
        bad += not ok
        print(name, ws, 'OK' if ok else f'MISMATCH\n  got  {got}\n  want {want}')
shutil.rmtree(BUILD, ignore_errors=True)
print('all agree' if not bad else f'{bad} mismatches')
sys.exit(1 if bad else 0)
