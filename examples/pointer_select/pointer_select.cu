// pointer_select: each thread picks a pointer into one of two buffers (or null) by a selector,
// parks it in a __shared__ table, and reads its neighbour's; a null pointer reads as -1, and
// a pointer into b is also written through (+100): dynamic provenance across buffers.
extern "C" __global__ void pointer_select(int *a, int *b, const int *sel, int *out)
{
    __shared__ int *slot[8];
    unsigned t = threadIdx.x;
    int s = sel[t];
    slot[t] = s == 0 ? nullptr : s > 0 ? a + (s - 1) : b + (-s - 1);
    __syncthreads();
    int *p = slot[(t + 1) & 7];
    out[t] = p != nullptr ? *p : -1;
    __syncthreads();
    if (p != nullptr && sel[(t + 1) & 7] < 0)
        *p += 100;
}
