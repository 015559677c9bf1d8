// 64-bit division and remainder by a divisor known only at run time, as
// size_t and long long index arithmetic does (row = idx / cols, ...).
// Compiled by
//   nvcc -ptx -arch=sm_75 wide_divide.cu
//   clang-19 --cuda-device-only --cuda-gpu-arch=sm_75 -O3 -S --cuda-path=/usr/local/cuda \
//       -Wno-unknown-cuda-version -I<empty stub headers> wide_divide.cu -o wide_divide.clang.ptx

extern "C" __global__ void wide_divide(const long long* a, const long long* b, long long* q,
                                       long long* r, unsigned long long* uq,
                                       unsigned long long* ur, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    q[i] = a[i] / b[i];
    r[i] = a[i] % b[i];
    uq[i] = (unsigned long long)a[i] / (unsigned long long)b[i];
    ur[i] = (unsigned long long)a[i] % (unsigned long long)b[i];
  }
}
