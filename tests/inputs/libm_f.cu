// libm_f: CUDA's float math library as compilers inline it (range reductions,
// polynomials in fma, ex2.approx/lg2.approx/rcp.approx at their core), one entry per
// function. nvcc -ptx -arch=sm_75 libm_f.cu -o libm_f.ptx
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
