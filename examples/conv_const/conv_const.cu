// conv_const: a 5-tap convolution with clamped edges whose taps and bias live in __constant__ memory.
__constant__ float taps[5] = {0.0625f, 0.25f, 0.375f, 0.25f, 0.0625f};
__constant__ short bias_q8 = -48;

extern "C" __global__ void conv_const(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float s = bias_q8 / 256.0f;
    for (int k = 0; k < 5; ++k) {
        int j = min(max(i + k - 2, 0), n - 1);
        s += taps[k] * x[j];
    }
    y[i] = s;
}
