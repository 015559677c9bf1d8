// rank_lanemask: per-warp compaction of negative inputs to the front of the warp's segment: rank = __popc(ballot & %lanemask_le), lane from %lanemask_eq; the warp's last kept lane writes the count.
extern "C" __global__ void rank_lanemask(const int *in, int *out, int *wcount)
{
    unsigned t = threadIdx.x;
    int x = in[t];
    unsigned keep = __ballot_sync(__activemask(), x < 0);
    unsigned le, eq;
    asm("mov.u32 %0, %%lanemask_le;" : "=r"(le));
    asm("mov.u32 %0, %%lanemask_eq;" : "=r"(eq));
    unsigned lane = __ffs(eq) - 1;
    unsigned start = t - lane;            // first thread of this warp
    if (keep & eq) {                      // my own vote
        unsigned r = __popc(keep & le);   // 1-based inclusive rank
        out[start + r - 1] = x;
        if (r == (unsigned)__popc(keep))
            wcount[start] = r;
    }
}
