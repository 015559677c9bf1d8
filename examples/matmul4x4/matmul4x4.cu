// matmul4x4: C = A * B for 4x4 row-major int matrices, one thread per C element in a 4x4 block.
extern "C" __global__ void matmul4x4(const int *A, const int *B, int *C)
{
    int row = threadIdx.y, col = threadIdx.x;
    int acc = 0;
    for (int k = 0; k < 4; ++k)
        acc += A[row * 4 + k] * B[k * 4 + col];
    C[row * 4 + col] = acc;
}
