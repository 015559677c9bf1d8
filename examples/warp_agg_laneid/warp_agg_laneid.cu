// warp_agg_laneid: warp-aggregated histogram: lanes with the same key elect a leader (%laneid via asm, __shfl_sync, __ballot_sync loop) that does one atomicAdd for the group.
extern "C" __global__ void warp_agg_laneid(const int *in, unsigned *hist, unsigned *natomics, int *leader_of)
{
    unsigned t = threadIdx.x;
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    int key = in[t] & 3;
    unsigned active = __activemask();
    unsigned todo = active;
    while (todo != 0) {                   // uniform: every lane has the same todo
        int leader = __ffs(todo) - 1;
        int k = __shfl_sync(active, key, leader);
        unsigned peers = __ballot_sync(active, key == k);
        if (lane == (unsigned)leader) {
            atomicAdd(&hist[k], (unsigned)__popc(peers));
            atomicAdd(natomics, 1u);
        }
        if (key == k)
            leader_of[t] = leader;
        todo &= ~peers;
    }
}
