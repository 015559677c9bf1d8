// __syncthreads_count / _or / _and (PTX `bar.red`), as everyday CUDA uses
// them: counts and votes over the CTA in a loop, and a loop that runs until
// no thread of the CTA has work left. Compiled by
//   nvcc -ptx -arch=sm_75 barrier_reductions.cu
//   clang-19 --cuda-device-only --cuda-gpu-arch=sm_75 -O3 -S --cuda-path=/usr/local/cuda \
//       -Wno-unknown-cuda-version -I<empty stub headers> barrier_reductions.cu \
//       -o barrier_reductions.clang.ptx

extern "C" __global__ void votes(const int* a, int* out, int rounds) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = a[i], total = 0, any = 0, all = 0;
  for (int r = 0; r < rounds; ++r) {  // one after another: each sees its own count
    total += __syncthreads_count(v > r);
    any += __syncthreads_or(v == r);
    all += __syncthreads_and(v >= r);
  }
  out[3 * i] = total;
  out[3 * i + 1] = any;
  out[3 * i + 2] = all;
}

extern "C" __global__ void halve_until_small(int* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i], steps = 0;
  while (__syncthreads_or(v >= 4)) {  // until no thread of the block has work
    if (v >= 4) v >>= 1;
    ++steps;
  }
  x[i] = v * 100 + steps;
}
