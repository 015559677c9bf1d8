// splitmix64: out[i] = splitmix64(seed + in[i] * golden gamma) on u64 (64-bit multiply, xor-shift), and the xor of all outputs by 64-bit atomicXor.
extern "C" __global__ void splitmix64(const unsigned *in, unsigned long long *out, unsigned long long *xall, unsigned long long seed)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long z = seed + (unsigned long long)in[i] * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z = z ^ (z >> 31);
    out[i] = z;
    atomicXor(xall, z);
}
