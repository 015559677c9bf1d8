// f64 idioms of float code beyond examples/double_literals: math.h on a
// promoted value (floor, ceil, trunc, rint, round: cvt.rXi.f64.f64 and
// copysign.f64), division by a double literal and of two doubles
// (div.rn.f64), __drcp_rn (rcp.rn.f64) and sqrt of a double (sqrt.rn.f64).
// nvcc -ptx -arch=sm_75 f64_idioms.cu -o f64_idioms.ptx
extern "C" __global__ void rounding(float *x, int *q, int n)
{
    int i = threadIdx.x;
    if (i < n) {
        double h = x[i] * 0.5;
        x[i] = floor(h) + ceil(h) * 0.25 + trunc(h) + rint(h);
        q[i] = (int)round(h * 3.0);
    }
}

extern "C" __global__ void quotients(float *x, const int *k, int n)
{
    int i = threadIdx.x;
    if (i < n)
        x[i] = x[i] / 3.0 + (double)k[i] / x[i] + __drcp_rn((double)k[i])
               + sqrt((double)x[i] * 3.0);
}
