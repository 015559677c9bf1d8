// shared_s16: 16-bit data: s16 and u16 global loads (sign and zero extension), a __shared__ short buffer, neighbour differences in int, saturation back to s16.
extern "C" __global__ void shared_s16(const short *in, const unsigned short *uin, int *diff, short *sat, unsigned short *uout)
{
    __shared__ short s[12];
    unsigned t = threadIdx.x, n = blockDim.x;
    s[t] = in[t];
    __syncthreads();
    int d = (int)s[(t + 1) % n] - (int)s[t];
    diff[t] = d;
    int w = (int)s[t] * 2 + (int)uin[t];
    sat[t] = (short)max(-32768, min(32767, w));
    uout[t] = (unsigned short)(uin[t] + s[t]);
}
