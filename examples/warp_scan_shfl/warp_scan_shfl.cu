// warp_scan_shfl: block inclusive scan: __shfl_up_sync scan inside each warp (%laneid, width from __activemask), warp totals in shared memory, then each warp adds the totals before it.
extern "C" __global__ void warp_scan_shfl(const int *in, int *out)
{
    __shared__ int wtot[16];
    unsigned t = threadIdx.x;
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    unsigned active = __activemask();
    unsigned width = __popc(active);
    unsigned w = t / width;                // every warp of this block is full
    int v = in[t];
    for (unsigned off = 1; off < width; off <<= 1) {
        int o = __shfl_up_sync(active, v, off);
        if (lane >= off)
            v += o;
    }
    if (lane == width - 1)
        wtot[w] = v;
    __syncthreads();
    for (unsigned k = 0; k < w; k++)
        v += wtot[k];
    out[t] = v;
}
