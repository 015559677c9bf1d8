// warp_agg_atomic: warp-aggregated atomicAdd: per warp one leader (__activemask, __ballot_sync, __ffs) reserves slots for the warp's positive inputs; each lane takes base + __popc(mask & %lanemask_lt).
extern "C" __global__ void warp_agg_atomic(const int *in, unsigned *count, unsigned *hits, int *rank)
{
    unsigned t = threadIdx.x;
    int x = in[t];
    unsigned active = __activemask();
    unsigned mask = __ballot_sync(active, x > 0);
    unsigned lt;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
    unsigned lane = __popc(lt);
    unsigned r = __popc(mask & lt);
    if (mask != 0) {                      // uniform across the warp
        int leader = __ffs(mask) - 1;
        unsigned base = 0;
        if (lane == (unsigned)leader)
            base = atomicAdd(count, __popc(mask));
        base = __shfl_sync(active, base, leader);
        if (x > 0)
            atomicAdd(&hits[base + r], 1u);   // every reserved slot exactly once
    }
    rank[t] = x > 0 ? (int)r : -1 - (int)lane;
}
