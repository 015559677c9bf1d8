// warp_reduce_shfl: per-warp sum with __shfl_down_sync over warpSize lanes; lane 0 of warp w writes out[w].
extern "C" __global__ void warp_reduce_shfl(const int *in, int *out)
{
    unsigned t = threadIdx.x;
    int v = in[t];
    for (int off = warpSize / 2; off > 0; off /= 2) {
        int o = __shfl_down_sync(0xffffffffu, v, off);
        if (t + off < blockDim.x)   // ignore lanes this block does not have
            v += o;
    }
    if (t % warpSize == 0)
        out[t / warpSize] = v;
}
