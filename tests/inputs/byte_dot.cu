// __dp4a (int8 dot products, as quantized inference code writes them) and
// __sad/__usad (sums of absolute differences, as block matching does).
// Compiled by
//   nvcc -ptx -arch=sm_75 byte_dot.cu
//   clang-19 --cuda-device-only --cuda-gpu-arch=sm_75 -O3 -S --cuda-path=/usr/local/cuda \
//       -Wno-unknown-cuda-version -I<empty stub headers> byte_dot.cu -o byte_dot.clang.ptx

extern "C" __global__ void byte_dot(const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[4 * i] = __dp4a(a[i], b[i], i - 3);                          // signed bytes
    out[4 * i + 1] = (int)__dp4a((unsigned)a[i], (unsigned)b[i], 7u);  // unsigned bytes
    out[4 * i + 2] = __sad(a[i], b[i], (unsigned)i);
    out[4 * i + 3] = (int)__usad((unsigned)a[i], (unsigned)b[i], 1u);
  }
}
