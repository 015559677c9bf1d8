// shfl_xor_warpid: __shfl_xor_sync butterfly all-reduce (sum, max) over the warp's lanes, __syncwarp between shared writes and reads, %warpid/%nwarpid via asm (distinct warps counted by atomicOr).
extern "C" __global__ void shfl_xor_warpid(const int *in, int *sum, int *mx, int *nbr, unsigned *info)
{
    __shared__ int s[16];
    __shared__ unsigned warps;
    unsigned t = threadIdx.x;
    if (t == 0)
        warps = 0;
    __syncthreads();
    unsigned active = __activemask();
    int width = __popc(active);            // lanes this warp has
    int v = in[t], m = v;
    for (int k = 1; k < width; k <<= 1) {
        v += __shfl_xor_sync(active, v, k);
        m = max(m, __shfl_xor_sync(active, m, k));
    }
    sum[t] = v;
    mx[t] = m;
    s[t] = in[t] * 10;
    __syncwarp();
    nbr[t] = s[t ^ 1];                     // partner lane, same warp
    unsigned wid, nw;
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(wid));
    asm("mov.u32 %0, %%nwarpid;" : "=r"(nw));
    atomicOr(&warps, 1u << (wid & 31));
    int w0 = __shfl_sync(active, (int)wid, 0);
    __syncthreads();
    info[t] = (wid < nw) | ((unsigned)(w0 == (int)wid) << 1) | ((unsigned)__popc(warps) << 2);
}
