// Host stand-in for cuda_fp16.h (shim_check.py): __half as GCC's _Float16,
// whose conversion from float rounds to nearest even as __float2half does.
#pragma once
#include <cstring>
struct __half { unsigned short x; };
inline float __half2float(__half h) { _Float16 f; std::memcpy(&f, &h.x, 2); return (float)f; }
inline __half __float2half(float v) { _Float16 f = (_Float16)v; __half h; std::memcpy(&h.x, &f, 2); return h; }
