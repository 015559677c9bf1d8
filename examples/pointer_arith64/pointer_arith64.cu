// pointer_arith64: 64-bit indices and pointer offsets: dst[n-1-i] = src[i] - src[i-2] + (i << 33) (src is passed 2 elements in).
extern "C" __global__ void pointer_arith64(const long long *src, long long *dst, unsigned long long n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const long long *p = src + i;
    long long v = p[0] - p[-2] + (long long)(i << 33);
    long long *q = dst + (n - 1 - i);
    *q = v;
}
