// Host (C++20) stand-ins for the CUDA built-ins the examples use; see shim_check.py.
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
struct dim3s { unsigned x, y, z; };
thread_local dim3s threadIdx, blockIdx;
dim3s blockDim, gridDim;
int warpSize;
thread_local std::barrier<> *blk_bar;
thread_local std::barrier<> *warp_bar;
thread_local unsigned long long *warp_slots;   // one per lane
thread_local int warp_lanes;                   // lanes that exist in this warp
#define __global__
#define __shared__ static
#define __device__
inline void __syncthreads() { blk_bar->arrive_and_wait(); }
inline unsigned lin() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
inline unsigned long long xchg_(unsigned long long v, int src) {
  int lane = lin() % warpSize;
  warp_slots[lane] = v; warp_bar->arrive_and_wait();
  unsigned long long r = (src >= 0 && src < warp_lanes) ? warp_slots[src] : 0xdeadbeefull;
  warp_bar->arrive_and_wait(); return r;
}
inline int __shfl_down_sync(unsigned, int v, int off) {
  int lane = lin() % warpSize; int src = lane + off;
  if (src > warpSize - 1) src = lane;
  return (int)xchg_((unsigned)v, src);
}
inline unsigned __ballot_sync(unsigned, int p) {
  int lane = lin() % warpSize;
  warp_slots[lane] = p != 0; warp_bar->arrive_and_wait();
  unsigned b = 0; for (int l = 0; l < warp_lanes; ++l) if (warp_slots[l]) b |= 1u << l;
  warp_bar->arrive_and_wait(); return b;
}
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
inline int __all_sync(unsigned m, int p) { unsigned b = __ballot_sync(m, p); return b == (warp_lanes == 32 ? 0xffffffffu : (1u << warp_lanes) - 1); }
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline unsigned __brev(unsigned x) { unsigned r = 0; for (int i = 0; i < 32; ++i) if (x >> i & 1) r |= 1u << (31 - i); return r; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline int __float2int_rn(float f) { return (int)std::nearbyint(f); }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
unsigned char dyn_shared[4096];
