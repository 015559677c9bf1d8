// branchy: early returns, if/else, and a Collatz loop whose trip count depends on the data (capped at 16 steps).
extern "C" __global__ void branchy(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int x = in[i];
    if (x < 0) {
        out[i] = -x * 10;
        return;
    }
    int steps = 0;
    while (x > 1 && steps < 16) {
        if (x & 1)
            x = 3 * x + 1;
        else
            x >>= 1;
        ++steps;
    }
    out[i] = steps * 100 + x;
}
