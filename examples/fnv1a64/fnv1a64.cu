// fnv1a64: 64-bit FNV-1a hash of each u32 input's four bytes (little-endian), stored as u64; the high words also as u32.
extern "C" __global__ void fnv1a64(const unsigned *in, unsigned long long *out, unsigned *hi, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned x = in[i];
    unsigned long long h = 0xcbf29ce484222325ull;
#pragma unroll
    for (int b = 0; b < 4; b++) {
        h ^= (x >> (8 * b)) & 0xffu;
        h *= 0x100000001b3ull;
    }
    out[i] = h;
    hi[i] = (unsigned)(h >> 32);
}
