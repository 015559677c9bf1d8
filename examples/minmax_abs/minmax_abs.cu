// minmax_abs: signed min, max, abs, negation, clamp, a select, and an unsigned min of two int arrays.
extern "C" __global__ void minmax_abs(const int *a, const int *b, int *out, unsigned *uout)
{
    unsigned t = threadIdx.x;
    int x = a[t], y = b[t];
    int *o = out + 6 * t;
    o[0] = min(x, y);
    o[1] = max(x, y);
    o[2] = abs(x);
    o[3] = -y;
    o[4] = max(-3, min(x, 3));
    o[5] = (x < y) ? y - x : x - y;
    unsigned ux = (unsigned)x, uy = (unsigned)y;
    uout[t] = (ux < uy) ? ux : uy;
}
