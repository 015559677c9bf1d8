// rmsnorm_f: RMSNorm of each row, one thread per row: sum of squares, 1/sqrtf(mean + eps), times a weight
extern "C" __global__ void rmsnorm_f(const float* x, const float* weight, float* y,
                                     int rows, int cols, float eps)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * cols;
    float sum_sq = 0.0f;
    for (int c = 0; c < cols; ++c)
        sum_sq += xr[c] * xr[c];
    float inv = 1.0f / sqrtf(sum_sq / (float)cols + eps);
    for (int c = 0; c < cols; ++c)
        y[row * cols + c] = xr[c] * inv * weight[c];
}
