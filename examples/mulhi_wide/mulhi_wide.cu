// mulhi_wide: __umulhi, __mulhi, the low 32-bit product, and full 64-bit unsigned and signed products of 32-bit inputs.
extern "C" __global__ void mulhi_wide(const unsigned *a, const unsigned *b, unsigned *hi_u, int *hi_s,
                                      unsigned *lo, unsigned long long *wide_u, long long *wide_s)
{
    unsigned t = threadIdx.x;
    unsigned x = a[t], y = b[t];
    hi_u[t] = __umulhi(x, y);
    hi_s[t] = __mulhi((int)x, (int)y);
    lo[t] = x * y;
    wide_u[t] = (unsigned long long)x * y;
    wide_s[t] = (long long)(int)x * (int)y;
}
