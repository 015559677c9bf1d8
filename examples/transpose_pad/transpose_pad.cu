// transpose_pad: 4x4-tile matrix transpose through a padded __shared__ tile[4][5], 2-D block and grid over a rows x cols int matrix.
extern "C" __global__ void transpose_pad(const int *in, int *out, int rows, int cols)
{
    __shared__ int tile[4][5];
    int x = blockIdx.x * 4 + threadIdx.x;
    int y = blockIdx.y * 4 + threadIdx.y;
    if (x < cols && y < rows)
        tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
    __syncthreads();
    int ox = blockIdx.y * 4 + threadIdx.x;     // column in out (a row of in)
    int oy = blockIdx.x * 4 + threadIdx.y;     // row in out (a column of in)
    if (ox < rows && oy < cols)
        out[oy * rows + ox] = tile[threadIdx.x][threadIdx.y];
}
