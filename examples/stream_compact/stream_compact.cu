// stream_compact: keep the positive inputs: a slot from atomicAdd on a global counter, then (after __syncthreads) each kept element is moved to its stable place by ranking the original indices.
extern "C" __global__ void stream_compact(const int *in, int *out, int *count, int n)
{
    __shared__ int s_idx[16];
    int i = threadIdx.x;
    if (i < n && in[i] > 0) {
        int slot = atomicAdd(count, 1);
        s_idx[slot] = i;
    }
    __syncthreads();
    int c = *count;
    if (i < c) {
        int mine = s_idx[i], r = 0;
        for (int j = 0; j < c; j++)
            r += s_idx[j] < mine;
        out[r] = in[mine];
    }
}
