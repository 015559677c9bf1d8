// Everyday float code that computes in double without asking for it: a
// double literal promotes the float expression around it to f64 (nvcc and
// clang emit cvt.f64.f32, f64 arithmetic and compares, cvt.rn.f32.f64),
// and casts go through double to int and back.
extern "C" __global__ void double_literals(const float *x, const int *k, float *y, int *q, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = x[i];
    y[4 * i + 0] = 0.5 * v + 0.25;                       // f64 multiply and add
    y[4 * i + 1] = v > 0.1 ? v - 0.1 : v * 1.1 + 1e-3;   // compare, subtract, fma
    y[4 * i + 2] = k[i] * 0.001;                          // int to double
    double s = 0.0;
    for (int j = 0; j <= i; ++j)                          // a double accumulator
        s += x[j] * 0.3;
    y[4 * i + 3] = fmax(s, -1.5);
    q[2 * i + 0] = (int)(v * 100.0);                      // truncating casts
    q[2 * i + 1] = (unsigned)(long long)(s * -7.25) + (int)(k[i] * 2.5);
}
