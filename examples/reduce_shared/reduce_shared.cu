// reduce_shared: per-CTA sum of in[] with a shared-memory tree reduction and __syncthreads(); out[blockIdx.x] = sum.
extern "C" __global__ void reduce_shared(const int *in, int *out)
{
    __shared__ int s[8];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}
