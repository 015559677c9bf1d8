// vote_ballot: per warp, __ballot_sync / __any_sync / __all_sync of in[t] > 0 and the ballot's popcount; lane 0 writes them.
extern "C" __global__ void vote_ballot(const int *in, unsigned *out)
{
    unsigned t = threadIdx.x;
    int pred = in[t] > 0;
    unsigned ballot = __ballot_sync(0xffffffffu, pred);
    int any = __any_sync(0xffffffffu, pred);
    int all = __all_sync(0xffffffffu, pred);
    if (t % warpSize == 0) {
        unsigned *o = out + 4 * (t / warpSize);
        o[0] = ballot;
        o[1] = any;
        o[2] = all;
        o[3] = __popc(ballot);
    }
}
