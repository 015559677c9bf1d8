// saxpy_s32: y[i] = a * x[i] + y[i] on 32-bit ints for i < n (threads past n do nothing).
extern "C" __global__ void saxpy_s32(int n, int a, const int *x, int *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
