// bitonic_shared: bitonic sort of blockDim.x ints in shared memory: compare-exchange with partner tid ^ j, direction from tid & k, __syncthreads between steps.
extern "C" __global__ void bitonic_shared(int *data)
{
    __shared__ int s[16];
    unsigned t = threadIdx.x, n = blockDim.x;
    s[t] = data[t];
    __syncthreads();
    for (unsigned k = 2; k <= n; k <<= 1) {
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            unsigned p = t ^ j;
            if (p > t) {
                int a = s[t], b = s[p];
                bool up = (t & k) == 0;
                if ((a > b) == up) {
                    s[t] = b;
                    s[p] = a;
                }
            }
            __syncthreads();
        }
    }
    data[t] = s[t];
}
