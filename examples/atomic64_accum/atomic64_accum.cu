// atomic64_accum: 64-bit accumulators: atomicAdd on unsigned long long of sign-extended ints, atomicMin/atomicMax on long long and unsigned long long.
extern "C" __global__ void atomic64_accum(const int *in, unsigned long long *sum, long long *smin, long long *smax,
                                          unsigned long long *umin, unsigned long long *umax)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int x = in[i];
    long long w = (long long)x << 20;
    atomicAdd(sum, (unsigned long long)(long long)x);
    atomicMin(smin, w);
    atomicMax(smax, w);
    atomicMin(umin, (unsigned long long)w);
    atomicMax(umax, (unsigned long long)w);
}
