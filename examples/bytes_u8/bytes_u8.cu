// bytes_u8: byte and halfword data: u8 wraparound arithmetic, arithmetic shift of s8, and s8 -> s16 widening multiply.
extern "C" __global__ void bytes_u8(const unsigned char *in, unsigned char *out, signed char *sout, short *wide, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned char c = in[i];
    signed char s = (signed char)c;
    out[i] = (unsigned char)(c * 3 + 7);
    sout[i] = (signed char)(s >> 2);
    wide[i] = (short)(s * 300);
}
