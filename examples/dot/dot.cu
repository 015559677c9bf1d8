// dot: each thread i < n atomically adds a[i] * b[i] into *result (integer dot product).
extern "C" __global__ void dot(const int *a, const int *b, int *result, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(result, a[i] * b[i]);
}
