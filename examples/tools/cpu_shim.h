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
#define __constant__ const
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

// --- added for the warp-level, 64-bit-atomic and vector-type examples --------------
#include <type_traits>
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(4) uchar4 { unsigned char x, y, z, w; };
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) { return {x, y, z, w}; }
// a buffer argument converts to whatever pointer type the kernel declares (KV*, uchar4*, ...)
struct AnyPtr { void *p; template <class T> operator T *() const { return (T *)p; } };
inline unsigned lane_() { return lin() % warpSize; }
inline unsigned full_() { return warp_lanes == 32 ? 0xffffffffu : (1u << warp_lanes) - 1; }
// warp collectives: call them where the whole warp is converged (as the examples do)
inline unsigned __activemask() { return full_(); }
inline void __syncwarp(unsigned = 0xffffffffu) { warp_bar->arrive_and_wait(); }
inline int __shfl_sync(unsigned, int v, int src) { return (int)xchg_((unsigned)v, ((src % warpSize) + warpSize) % warpSize); }
inline int __shfl_xor_sync(unsigned, int v, int m) {
  int src = (int)lane_() ^ m; if (src > warpSize - 1) src = lane_();
  return (int)xchg_((unsigned)v, src);
}
inline int __shfl_up_sync(unsigned, int v, unsigned d) {
  int src = (int)lane_() - (int)d; if (src < 0) src = lane_();
  return (int)xchg_((unsigned)v, src);
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
// the special registers the examples read with inline asm (shim_check.py rewrites the asm)
inline unsigned shim_sreg_laneid() { return lane_(); }
inline unsigned shim_sreg_warpid() { return lin() / warpSize; }
inline unsigned shim_sreg_nwarpid() { return (blockDim.x * blockDim.y * blockDim.z + warpSize - 1) / warpSize; }
inline unsigned shim_sreg_lanemask_eq() { return 1u << lane_(); }
inline unsigned shim_sreg_lanemask_lt() { return (1u << lane_()) - 1; }
inline unsigned shim_sreg_lanemask_le() { return (unsigned)((2ull << lane_()) - 1); }
inline unsigned shim_sreg_lanemask_gt() { return ~(unsigned)((2ull << lane_()) - 1); }
inline unsigned shim_sreg_lanemask_ge() { return ~((1u << lane_()) - 1); }
// atomics
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
template <class T> T atomicCAS(T *p, std::type_identity_t<T> cmp, std::type_identity_t<T> v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp;
}
template <class T> T atomicExch(T *p, std::type_identity_t<T> v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <class T, class F> T atomic_rmw_(T *p, F f) {
  T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(p, &old, f(old), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return old;
}
template <class T> T atomicMin(T *p, std::type_identity_t<T> v) { return atomic_rmw_(p, [v](T o) { return v < o ? v : o; }); }
template <class T> T atomicMax(T *p, std::type_identity_t<T> v) { return atomic_rmw_(p, [v](T o) { return v > o ? v : o; }); }
template <class T> T atomicOr(T *p, std::type_identity_t<T> v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <class T> T atomicAnd(T *p, std::type_identity_t<T> v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
template <class T> T atomicXor(T *p, std::type_identity_t<T> v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicInc(unsigned *p, unsigned lim) { return atomic_rmw_(p, [lim](unsigned o) { return o >= lim ? 0u : o + 1; }); }
// byte permutes: __byte_perm (selector nibbles & 7) and PTX prmt.b32 in its modes (inline asm)
inline unsigned prmt_byte_(unsigned a, unsigned b, unsigned k) { unsigned long long v = a | (unsigned long long)b << 32; return (v >> (8 * (k & 7))) & 0xff; }
inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
  unsigned r = 0; for (int i = 0; i < 4; ++i) r |= prmt_byte_(a, b, (s >> (4 * i)) & 7) << (8 * i); return r;
}
inline unsigned shim_prmt(const char *mode, unsigned a, unsigned b, unsigned c) {
  static const char *names[] = {"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"};
  static const char *tab[6][4] = {{"3210", "4321", "5432", "6543"}, {"5670", "6701", "7012", "0123"},
                                  {"0000", "1111", "2222", "3333"}, {"3210", "3211", "3222", "3333"},
                                  {"0000", "1110", "2210", "3210"}, {"1010", "3232", "1010", "3232"}};
  unsigned r = 0;
  if (!*mode) {
    for (int i = 0; i < 4; ++i) {
      unsigned n = (c >> (4 * i)) & 0xf, byte = prmt_byte_(a, b, n);
      if (n & 8) byte = (byte & 0x80) ? 0xff : 0;
      r |= byte << (8 * i);
    }
    return r;
  }
  for (int m = 0; m < 6; ++m)
    if (!std::strcmp(mode, names[m]))
      for (int i = 0; i < 4; ++i) r |= prmt_byte_(a, b, tab[m][c & 3][3 - i] - '0') << (8 * i);
  return r;
}
alignas(16) unsigned char dyn_shared[4096];
