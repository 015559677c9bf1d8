// pointer_table: an int* table[4] in shared memory filled with base + k*4 (rows of a 4x4 matrix), then loaded and dereferenced; int** double indirection and writes through a loaded pointer.
extern "C" __global__ void pointer_table(int *base, const int *sel, int *out)
{
    __shared__ int *table[4];
    unsigned t = threadIdx.x;
    if (t < 4)
        table[t] = base + 4 * (3 - t);            // rows in reverse order
    __syncthreads();
    int s = sel[t];
    int **pp = &table[s & 3];
    int *row = *pp;
    int v = row[t & 3] + (*pp)[(t + 1) & 3];
    out[t] = v;
    __syncthreads();
    if (t < 4)
        table[t][t] = -table[t][t];               // negate the anti-diagonal of base
}
