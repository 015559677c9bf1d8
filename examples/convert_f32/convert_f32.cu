// convert_f32: int<->float conversions: s32/u32 -> f32 (round to nearest), f32 -> s32 truncating and rounding, floorf, float bits.
extern "C" __global__ void convert_f32(const int *xi, const float *xf, float *of, int *oi)
{
    unsigned t = threadIdx.x;
    int i = xi[t];
    float f = xf[t];
    of[3 * t + 0] = (float)i;
    of[3 * t + 1] = (float)(unsigned)i;
    of[3 * t + 2] = floorf(f);
    oi[3 * t + 0] = (int)f;
    oi[3 * t + 1] = __float2int_rn(f);
    oi[3 * t + 2] = __float_as_int(f);
}
