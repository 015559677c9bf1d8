// inclusive_scan: out[t] = in[0] + ... + in[t] for one CTA, Hillis-Steele scan in shared memory with barriers.
extern "C" __global__ void inclusive_scan(const int *in, int *out)
{
    __shared__ int s[8];
    unsigned t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    for (unsigned off = 1; off < blockDim.x; off <<= 1) {
        int v = (t >= off) ? s[t - off] : 0;
        __syncthreads();
        s[t] += v;
        __syncthreads();
    }
    out[t] = s[t];
}
