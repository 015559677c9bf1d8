// vector_add: c[i] = a[i] + b[i] for every i < n, launched as 2 CTAs of 4 threads.
extern "C" __global__ void vector_add(const int *a, const int *b, int *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
