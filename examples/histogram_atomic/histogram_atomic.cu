// histogram_atomic: hist[data[i] % nbins] += 1 with atomicAdd for every i < n.
extern "C" __global__ void histogram_atomic(const unsigned *data, unsigned *hist, unsigned nbins, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&hist[data[i] % nbins], 1u);
}
