// float_ops: IEEE-exact f32 add, sub, mul, div, __fsqrt_rn(fabsf), fmaf, fmaxf and a compare-select per thread.
extern "C" __global__ void float_ops(const float *a, const float *b, float *out)
{
    unsigned t = threadIdx.x;
    float x = a[t], y = b[t];
    float *o = out + 8 * t;
    o[0] = x + y;
    o[1] = x - y;
    o[2] = x * y;
    o[3] = x / y;
    o[4] = __fsqrt_rn(fabsf(x));   // sqrtf is sqrt.approx under clang-19
    o[5] = fmaf(x, y, 0.5f);
    o[6] = fmaxf(x, y);
    o[7] = (x < y) ? -1.0f : 2.0f;
}
