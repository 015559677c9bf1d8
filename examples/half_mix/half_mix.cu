// half_mix: half and bfloat16 storage around float math, and 64-bit integers converted to and from float.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void half_mix(const __half *h, const __nv_bfloat16 *b, const long long *n,
                                    __half *hout, __nv_bfloat16 *bout, float *mean,
                                    long long *rounded, unsigned long long *scaled, int len)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= len)
        return;
    float x = __half2float(h[i]);
    float y = __bfloat162float(b[i]);
    hout[i] = __float2half(x * y + 0.25f);
    bout[i] = __float2bfloat16(x - y);
    mean[i] = (x + y) / (float)n[i];
    rounded[i] = llrintf(x * 1000.0f);
    scaled[i] = (unsigned long long)(fabsf(y) * 4096.0f);
}
