// reverse_dynshared: reverses d[0..n) in place through a dynamically sized extern __shared__ array and a barrier.
extern "C" __global__ void reverse_dynshared(int *d, int n)
{
    extern __shared__ int s[];
    int t = threadIdx.x;
    if (t < n)
        s[t] = d[t];
    __syncthreads();
    if (t < n)
        d[t] = s[n - 1 - t];
}
