// last_block_reduce: "last block done": each block writes its partial sum, __threadfence(), atomicInc on a counter; the block that draws the last ticket sums the partials.
extern "C" __global__ void last_block_reduce(const int *in, volatile int *partial, unsigned *count, int *total)
{
    __shared__ int s[8];
    __shared__ bool last;
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = s[0];
        __threadfence();
        unsigned ticket = atomicInc(count, gridDim.x - 1);   // wraps back to 0
        last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (last && t == 0) {
        int sum = 0;
        for (unsigned b = 0; b < gridDim.x; b++)
            sum += partial[b];
        *total = sum;
    }
}
