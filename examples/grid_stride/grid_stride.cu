// grid_stride: 2-D grid, rows from blockIdx.y/threadIdx.y, columns by a grid-stride loop: out = in * 2 + row.
extern "C" __global__ void grid_stride(const int *in, int *out, int width, int height)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= height)
        return;
    for (int col = blockIdx.x * blockDim.x + threadIdx.x; col < width; col += blockDim.x * gridDim.x)
        out[row * width + col] = in[row * width + col] * 2 + row;
}
