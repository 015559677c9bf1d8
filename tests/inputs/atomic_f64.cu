// Everyday double-precision atomics: a sum reduced by atomicAdd(double*)
// with the old values it returns, and a histogram of weights in double.
// Compiled by
//   nvcc -ptx -arch=sm_75 atomic_f64.cu
//   clang-19 --cuda-device-only --cuda-gpu-arch=sm_75 -O3 -S --cuda-path=/usr/local/cuda \
//       -Wno-unknown-cuda-version -I<empty stub headers> atomic_f64.cu -o atomic_f64.clang.ptx
extern "C" __global__ void sum_f64(const double *x, double *total, double *olds, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        olds[i] = atomicAdd(total, x[i]);
    }
}

extern "C" __global__ void weighted_hist(const int *bins, const double *w, double *hist, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        atomicAdd(&hist[bins[i]], w[i]);
    }
}
