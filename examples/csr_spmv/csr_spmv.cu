// csr_spmv: integer sparse matrix-vector product y = A*x with A in CSR (row_ptr, col_idx, vals), one thread per row, guard row < nrows.
extern "C" __global__ void csr_spmv(const int *row_ptr, const int *col_idx, const int *vals, const int *x, int *y, int nrows)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= nrows)
        return;
    int acc = 0;
    for (int k = row_ptr[row]; k < row_ptr[row + 1]; k++)
        acc += vals[k] * x[col_idx[k]];
    y[row] = acc;
}
