// bit_tricks: popc, clz, brev, ffs, a bit-field extract, Gray code, lowest set bit and rotate of each input word.
extern "C" __global__ void bit_tricks(const unsigned *in, unsigned *out)
{
    unsigned t = threadIdx.x;
    unsigned x = in[t];
    unsigned *o = out + 8 * t;
    o[0] = __popc(x);
    o[1] = __clz(x);
    o[2] = __brev(x);
    o[3] = __ffs((int)x);
    o[4] = (x >> 5) & 0x3ffu;
    o[5] = x ^ (x >> 1);
    o[6] = x & (0u - x);
    o[7] = (x << 7) | (x >> 25);
}
