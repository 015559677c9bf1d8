// libm_f: CUDA's float math library as compilers inline it (range reductions,
// polynomials in fma, ex2.approx/lg2.approx/rcp.approx at their core), one entry per
// function. nvcc -ptx -arch=sm_75 libm_f.cu -o libm_f.ptx; clang-19 --cuda-device-only
// --cuda-gpu-arch=sm_75 -O3 -S --cuda-path=/usr/local/cuda -Wno-unknown-cuda-version
// -I ../../examples/stubs libm_f.cu -o libm_f.clang.ptx
#include <math.h>
#define UNARY(name, expr) \
    extern "C" __global__ void name(const float *x, float *y) \
    { int i = blockIdx.x * blockDim.x + threadIdx.x; float v = x[i]; y[i] = expr; }
UNARY(exp_f, expf(v))
UNARY(log1_f, logf(fabsf(v) + 1.0f))
UNARY(tanh_f, tanhf(v))
UNARY(erf_f, erff(v))
UNARY(atan2_f, atan2f(v, 2.0f))
UNARY(cbrt_f, cbrtf(v))
UNARY(fmod_f, fmodf(v, 3.0f))
UNARY(expm1_f, expm1f(v))
UNARY(hypot_f, hypotf(v, 2.0f))
UNARY(sigmoid_f, 1.0f / (1.0f + expf(-v)))
// more of libm (issue 23, session 3): some need more than 8 predicates live
// at once (remainderf with the rest of a division's checks), which the machine
// keeps as 0/1 words
__device__ float frexp_ldexp(float v) { int e; float m = frexpf(v, &e); return ldexpf(m, e % 7); }
UNARY(pow_f, powf(fabsf(v) + 0.5f, 1.75f))
UNARY(exp2_f, exp2f(v))
UNARY(log2_f, log2f(fabsf(v) + 1.0f))
UNARY(log10_f, log10f(fabsf(v) + 1.0f))
UNARY(sinh_f, sinhf(v))
UNARY(asin_f, asinf(v * 0.01f))
UNARY(acos_f, acosf(v * 0.01f))
UNARY(atan_f, atanf(v))
UNARY(remainder_f, remainderf(v, 2.0f) + 1.0f / v + v / 7.0f)
UNARY(frexp_f, frexp_ldexp(v))
// the trigonometric functions (issue 23, session 7): their argument reduction
// for large |x| (Payne-Hanek) reads the module table __cudart_i2opi_f, a
// module variable the machine places as a buffer, and clang's inlines its
// 32x32+carry products as mad.lo.cc/madc.hi
__device__ float sin_plus_cos(float v) { float s, c; sincosf(v, &s, &c); return s + 2.0f * c; }
UNARY(sin_f, sinf(v))
UNARY(cos_f, cosf(v))
UNARY(tan_f, tanf(v))
UNARY(sincos_f, sin_plus_cos(v))
