// grid_stride64: grid-stride loop with a 64-bit (size_t) induction variable used as the address, a bumped pointer, and a per-thread long long sum of squares.
extern "C" __global__ void grid_stride64(const int *in, int *out, long long *sq, unsigned long long n)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int *p = in + first;
    long long acc = 0;
    for (size_t i = first; i < n; i += stride, p += stride) {
        int x = *p;
        out[i] = x * 3 - (int)i;
        acc += (long long)x * x;
    }
    sq[first] = acc;
}
