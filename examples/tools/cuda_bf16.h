// Host stand-in for cuda_bf16.h (shim_check.py): __float2bfloat16 rounds to
// the nearest float of 8 significant bits (ties to even; quantum 2^-133 at
// the bottom of the range, as float's subnormals), NaN becomes 0x7FFF.
#pragma once
#include <cmath>
#include <cstring>
struct __nv_bfloat16 { unsigned short x; };
inline float __bfloat162float(__nv_bfloat16 b) {
    unsigned bits = (unsigned)b.x << 16; float f; std::memcpy(&f, &bits, 4); return f;
}
inline __nv_bfloat16 __float2bfloat16(float v) {
    if (std::isnan(v)) return __nv_bfloat16{0x7FFF};
    double r = v;
    if (v != 0 && std::isfinite(v)) {
        int e; std::frexp(r, &e);
        int quantum = std::max(e - 8, -133);
        r = std::ldexp(std::nearbyint(std::ldexp(r, -quantum)), quantum);
    }
    float f = (float)r; unsigned bits; std::memcpy(&bits, &f, 4);
    return __nv_bfloat16{(unsigned short)(bits >> 16)};
}
