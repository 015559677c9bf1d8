// radix_split: one radix-sort step on bit `bit`: per-element flag, exclusive scan in shared memory (__syncthreads), stable scatter of zeros then ones, keys and values.
extern "C" __global__ void radix_split(const unsigned *keys, const int *vals, unsigned *okeys, int *ovals, int bit)
{
    __shared__ unsigned s[16];
    unsigned t = threadIdx.x, n = blockDim.x;
    unsigned k = keys[t];
    unsigned f = (k >> bit) & 1u;
    s[t] = f;
    __syncthreads();
    for (unsigned off = 1; off < n; off <<= 1) {     // Hillis-Steele inclusive scan
        unsigned v = t >= off ? s[t - off] : 0;
        __syncthreads();
        s[t] += v;
        __syncthreads();
    }
    unsigned ones_before = s[t] - f;
    unsigned total_ones = s[n - 1];
    unsigned zeros = n - total_ones;
    unsigned dst = f ? zeros + ones_before : t - ones_before;
    okeys[dst] = k;
    ovals[dst] = vals[t];
}
