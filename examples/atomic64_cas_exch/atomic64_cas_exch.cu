// atomic64_cas_exch: a 64-bit atomicCAS loop (atomic multiply), atomicExch of u64 slots returning old values, and a data-dependent atomicCAS per slot.
extern "C" __global__ void atomic64_cas_exch(const unsigned long long *in, unsigned long long *prod,
                                             unsigned long long *slots, unsigned long long *olds, unsigned long long *cas)
{
    unsigned i = threadIdx.x;
    unsigned long long x = in[i];
    unsigned long long old = *prod, assumed;
    do {                                   // *prod *= x, atomically
        assumed = old;
        old = atomicCAS(prod, assumed, assumed * x);
    } while (old != assumed);
    olds[i] = atomicExch(&slots[i], x ^ 0xffffffff00000000ull);
    unsigned long long seen = atomicCAS(&cas[i], x & 0xf, x);   // succeeds where cas[i] == x & 15
    if (seen != (x & 0xf))
        cas[i] = seen + 1;
}
