// local_hist: a per-thread histogram in a local array indexed by data (nvcc and clang keep it in
// .local memory: a stack frame), then the most frequent bin (lowest on ties) and its count.
extern "C" __global__ void local_hist(const int *in, int *out, int n)
{
    int bins[8];
    for (int k = 0; k < 8; k++)
        bins[k] = 0;
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < n; i++)
        bins[in[t * n + i] & 7] += 1;
    int best = 0;
    for (int k = 1; k < 8; k++)
        if (bins[k] > bins[best])
            best = k;
    out[t] = best * 100 + bins[best];
}
