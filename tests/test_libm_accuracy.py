"""`ref` runs CUDA's float math library (tests/inputs/libm_f.cu, as nvcc and
clang inline it) within the error bounds NVIDIA documents for it (CUDA C++
Programming Guide, "Mathematical Functions": maximum ulp error against the
correctly rounded result), measured against Python's double-precision
`math` rounded to float32: an answer independent of qgc for kernels whose
exact bits only a GPU could give. It checks `ref`'s f32 arithmetic and its
`.approx` algorithms (expf, logf and the rest call `ex2.approx`,
`lg2.approx` and `rcp.approx` at their core) on real library code;
`test_expand_float` checks the machine against `ref` on the same kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_expand_float import LIBM_INPUTS, LIBM_PTX, _one_entry, libm_launch
from test_ref_engine import f32_bits

from qgc.frontend import parse_ptx
from qgc.runtime.ref import run_ref

f32 = np.float32


def _exact(fn, *args) -> float:
    """fn in double; an overflow is the infinity of its sign, a domain error NaN."""
    try:
        return fn(*args)
    except OverflowError:
        return math.copysign(math.inf, fn(*(math.copysign(1.0, a) for a in args)))
    except ValueError:
        return math.nan


def _frexp_ldexp(v: float) -> float:
    m, e = math.frexp(v)
    return math.ldexp(m, int(math.fmod(e, 7))) if math.isfinite(v) else v


#: kernel → (the function of x in float32 ops and double math, the maximum
#: ulp error CUDA documents; composites: their parts' bounds added up)
LIBM_BOUNDS = {
    "exp_f": (lambda x: _exact(math.exp, x), 2),
    "log1_f": (lambda x: math.log(f32(abs(x)) + f32(1)), 1),
    "tanh_f": (lambda x: math.tanh(x), 2),
    "erf_f": (lambda x: math.erf(x), 2),
    "atan2_f": (lambda x: math.atan2(x, 2.0), 3),
    "cbrt_f": (lambda x: math.cbrt(x), 1),
    "fmod_f": (lambda x: _exact(math.fmod, x, 3.0), 0),
    "expm1_f": (lambda x: _exact(math.expm1, x), 1),
    "hypot_f": (lambda x: math.hypot(x, 2.0), 3),
    "sigmoid_f": (lambda x: 1.0 / (1.0 + _exact(math.exp, -x)), 3),
    "pow_f": (lambda x: _exact(math.pow, f32(abs(x)) + f32(0.5), 1.75), 4),
    "exp2_f": (lambda x: _exact(math.exp2, x), 2),
    "log2_f": (lambda x: math.log2(f32(abs(x)) + f32(1)), 1),
    "log10_f": (lambda x: math.log10(f32(abs(x)) + f32(1)), 2),
    "sinh_f": (lambda x: _exact(math.sinh, x), 3),
    "asin_f": (lambda x: _exact(math.asin, f32(x) * f32(0.01)), 2),
    "acos_f": (lambda x: _exact(math.acos, f32(x) * f32(0.01)), 2),
    "atan_f": (lambda x: math.atan(x), 2),
    "frexp_f": (_frexp_ldexp, 0),
    "sin_f": (lambda x: _exact(math.sin, x), 2),
    "cos_f": (lambda x: _exact(math.cos, x), 2),
    "tan_f": (lambda x: _exact(math.tan, x), 4),
}


def _ordered(bits: int) -> int:
    """float32 bits on a line where neighbours differ by one (±0 meet at 0)."""
    return -(bits & 0x7FFF_FFFF) if bits >> 31 else bits


def ulps(got: float, exact: float) -> float:
    """Distance in float32 ulps from `got` to `exact` rounded to float32 (0
    when both are the same infinity or both NaN; inf when only one is)."""
    with np.errstate(over="ignore"):        # past the largest float: infinity
        want = float(f32(exact))
    if math.isnan(got) or math.isnan(want):
        return 0 if math.isnan(got) and math.isnan(want) else math.inf
    if math.isinf(got) or math.isinf(want):
        return 0 if got == want else math.inf
    return abs(_ordered(f32_bits(got)) - _ordered(f32_bits(want)))


@pytest.mark.parametrize("ptx", LIBM_PTX, ids=("nvcc", "clang"))
@pytest.mark.parametrize("name", sorted(LIBM_BOUNDS))
def test_cuda_math_functions_are_within_their_documented_error(name, ptx):
    function, bound = LIBM_BOUNDS[name]
    text = _one_entry(ptx.read_text(), name)
    got = run_ref(parse_ptx(text, ptx.name), libm_launch(name)).buffers[1]
    errors = {x: ulps(y, function(float(f32(x)))) for x, y in zip(LIBM_INPUTS, got, strict=True)}
    assert max(errors.values()) <= bound, {x: e for x, e in errors.items() if e > bound}
