// everyday_f: float kernels in the idioms of everyday ML and numeric CUDA code,
// one entry each: a block softmax (expf, fmaxf, shuffle and shared reductions),
// layernorm (rsqrtf), tanh GELU, float4 loads and stores, atomicAdd on a float,
// int8 quantisation (__float2int_rn), f32 <-> half, a float atomicMax as an
// atomicCAS loop, an Adam step (powf twice, sqrtf, division), cross-entropy
// (__expf, logf), and the rounding functions with isnan/isinf.
// nvcc -ptx -arch=sm_75 everyday_f.cu -o everyday_f.ptx; clang-19 --cuda-device-only
// --cuda-gpu-arch=sm_75 -O3 -S --cuda-path=/usr/local/cuda -Wno-unknown-cuda-version
// -I ../../examples/stubs everyday_f.cu -o everyday_f.clang.ptx
#include <cuda_fp16.h>
extern "C" __global__ void softmax_row(const float *x, float *y, int n) {
  __shared__ float red[32];
  int t = threadIdx.x;
  float m = -INFINITY;
  for (int i = t; i < n; i += blockDim.x) m = fmaxf(m, x[i]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  if ((t & 31) == 0) red[t >> 5] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < (blockDim.x + 31) / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  float s = 0.f;
  for (int i = t; i < n; i += blockDim.x) s += expf(x[i] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  if ((t & 31) == 0) red[t >> 5] = s;
  __syncthreads();
  s = 0.f;
  for (int w = 0; w < (blockDim.x + 31) / 32; ++w) s += red[w];
  for (int i = t; i < n; i += blockDim.x) y[i] = expf(x[i] - m) / s;
}
extern "C" __global__ void layernorm(const float *x, const float *g, const float *b, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float mean = 0.f, var = 0.f;
  for (int k = 0; k < 4; ++k) mean += x[4 * i + k];
  mean *= 0.25f;
  for (int k = 0; k < 4; ++k) { float d = x[4 * i + k] - mean; var += d * d; }
  float inv = rsqrtf(var * 0.25f + 1e-5f);
  for (int k = 0; k < 4; ++k) y[4 * i + k] = (x[4 * i + k] - mean) * inv * g[k] + b[k];
}
extern "C" __global__ void gelu_tanh(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))); }
}
extern "C" __global__ void float4_scale(const float4 *x, float4 *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float4 v = x[i]; v.x *= a; v.y *= a; v.z = fminf(v.z * a, 1.f); v.w = fabsf(v.w); y[i] = v; }
}
extern "C" __global__ void atomic_sum(const float *x, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, x[i] * 0.5f);
}
extern "C" __global__ void quantize(const float *x, signed char *q, float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { int v = __float2int_rn(x[i] / scale); q[i] = (signed char)max(-127, min(127, v)); }
}
extern "C" __global__ void to_half(const float *x, __half *h, float *back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { __half v = __float2half(x[i]); h[i] = v; back[i] = __half2float(v) + 1.0f; }
}
__device__ float atomicMaxFloat(float *addr, float v) {
  int *a = (int *)addr; int old = *a, assumed;
  do { assumed = old; if (__int_as_float(assumed) >= v) break;
       old = atomicCAS(a, assumed, __float_as_int(v)); } while (assumed != old);
  return __int_as_float(old);
}
extern "C" __global__ void max_cas(const float *x, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicMaxFloat(out, x[i]);
}
extern "C" __global__ void adam(float *p, float *m, float *v, const float *g, float lr, int t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float b1 = 0.9f, b2 = 0.999f;
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    float mh = m[i] / (1 - powf(b1, t)), vh = v[i] / (1 - powf(b2, t));
    p[i] -= lr * mh / (sqrtf(vh) + 1e-8f);
  }
}
extern "C" __global__ void cross_entropy(const float *logits, const int *label, float *loss, int n, int c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float m = -INFINITY; for (int k = 0; k < c; ++k) m = fmaxf(m, logits[i * c + k]);
    float s = 0; for (int k = 0; k < c; ++k) s += __expf(logits[i * c + k] - m);
    loss[i] = logf(s) + m - logits[i * c + label[i]];
  }
}
extern "C" __global__ void round_modes(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; y[4*i] = floorf(v); y[4*i+1] = ceilf(v); y[4*i+2] = roundf(v); y[4*i+3] = truncf(v) + rintf(v) + (float)(unsigned)fabsf(v) + (isnan(v) ? 1.f : 0.f) + (isinf(v) ? 2.f : 0.f); }
}
