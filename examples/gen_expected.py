#!/usr/bin/env python3
"""Write expected.json (and expected_warp32.json) for every example.

Each kernel is re-implemented here by hand, thread by thread, from its CUDA source
(not from its PTX): 32/64-bit integer wraparound is explicit, f32 arithmetic uses
numpy float32 (IEEE round-to-nearest-even) and fused multiply-adds are rounded once,
exactly, through fractions.Fraction.  Kernels with barriers are run phase by phase;
warp-level kernels are run for a given warp size.

    expected.json         the answer on a machine with 4-lane warps (laneid = tid % 4)
    expected_warp32.json  the answer with real 32-lane warps, written only where it differs

Run: python3 gen_expected.py [--check]   (--check: compare with the files on disk, write nothing)
"""

import json
import math
import os
import sys
from fractions import Fraction

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------
# integer and float helpers

BITS = {"u8": 8, "s8": 8, "u16": 16, "s16": 16, "u32": 32, "s32": 32, "u64": 64, "s64": 64}


def wrap(v, ty):
    """Two's-complement wraparound of a Python int to the element type ty."""
    bits = BITS[ty]
    v &= (1 << bits) - 1
    if ty[0] == "s" and v >> (bits - 1):
        v -= 1 << bits
    return v


def s32(v):
    return wrap(v, "s32")


def u32(v):
    return wrap(v, "u32")


def s64(v):
    return wrap(v, "s64")


def u64(v):
    return wrap(v, "u64")


def f32(v):
    return np.float32(v)


def round_f32(q):
    """Round an exact rational to the nearest float32 (ties to even)."""
    q = Fraction(q)
    if q == 0:
        return np.float32(0.0)
    sign = -1 if q < 0 else 1
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    assert Fraction(2) ** e <= a < Fraction(2) ** (e + 1)
    e = max(e, -126)                       # subnormals share the smallest exponent
    ulp = Fraction(2) ** (e - 23)
    m = a / ulp
    n = m.numerator // m.denominator
    rest = m - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1):
        n += 1
    val = n * ulp
    if val >= Fraction(2) ** 128:
        return np.float32(sign * np.inf)
    return np.float32(sign * float(val))   # exact: val is a float32 value


def fma_f32(a, b, c):
    """fma.rn.f32: a*b+c with a single rounding."""
    return round_f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def checked(op, a, b):
    """A numpy float32 op, cross-checked against exact rational arithmetic."""
    fa, fb = Fraction(float(a)), Fraction(float(b))
    exact = {"+": fa + fb, "-": fa - fb, "*": fa * fb, "/": fa / fb}[op]
    with np.errstate(all="raise"):
        got = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op](f32(a), f32(b))
    assert got == round_f32(exact), (op, a, b, got, round_f32(exact))
    return f32(got)


def trunc_div(x, y):
    """C integer division: truncates toward zero."""
    q = abs(x) // abs(y)
    return -q if (x < 0) != (y < 0) else q


# ---------------------------------------------------------------------------
# memory and launch model


class Ptr:
    """A typed pointer into a buffer: element `off` of `buf`; stores wrap to the type."""

    def __init__(self, buf, ty, off=0):
        self.buf, self.ty, self.off = buf, ty, off

    def __add__(self, k):
        return Ptr(self.buf, self.ty, self.off + k)

    def _index(self, k):
        j = self.off + k
        if not 0 <= j < len(self.buf):
            raise IndexError(f"access to element {j} of a {len(self.buf)}-element buffer")
        return j

    def __getitem__(self, k):
        return self.buf[self._index(k)]

    def __setitem__(self, k, v):
        j = self._index(k)
        if self.ty == "f32":
            assert isinstance(v, np.float32), v
            self.buf[j] = v
        else:
            assert isinstance(v, int), v
            self.buf[j] = wrap(v, self.ty)


class Thread:
    def __init__(self, ctaid, tid, nctaid, ntid):
        self.ctaid, self.tid, self.nctaid, self.ntid = ctaid, tid, nctaid, ntid
        # linear thread id inside the CTA: x fastest
        self.linear = tid[0] + ntid[0] * (tid[1] + ntid[1] * tid[2])


def ctas(launch):
    gx, gy, gz = launch["grid"]
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                yield (x, y, z)


def cta_threads(launch, ctaid):
    bx, by, bz = launch["block"]
    return [Thread(ctaid, (x, y, z), tuple(launch["grid"]), (bx, by, bz))
            for z in range(bz) for y in range(by) for x in range(bx)]


def all_threads(launch):
    for c in ctas(launch):
        yield from cta_threads(launch, c)


def gid(t):
    """blockIdx.x * blockDim.x + threadIdx.x"""
    return t.ctaid[0] * t.ntid[0] + t.tid[0]


def make_args(launch):
    """Kernel arguments: Ptr for pointers (over a fresh copy of the data), values for scalars."""
    args, bufs = [], []
    for a in launch["args"]:
        ty = a["type"]
        if ty.endswith("*"):
            ety = ty[:-1]
            buf = [f32(v) for v in a["data"]] if ety == "f32" else [wrap(int(v), ety) for v in a["data"]]
            bufs.append(buf)
            args.append(Ptr(buf, ety, a.get("offset", 0)))
        else:
            bufs.append(None)
            args.append(f32(a["value"]) if ty == "f32" else wrap(int(a["value"]), ty))
    return args, bufs


def result_json(bufs):
    out = []
    for b in bufs:
        if b is None:
            out.append(None)
        else:
            out.append([float(v) if isinstance(v, np.float32) else int(v) for v in b])
    return {"buffers": out}


# ---------------------------------------------------------------------------
# the kernels

KERNELS = {}


def kernel(warp_sensitive=False):
    def reg(fn):
        KERNELS[fn.__name__] = (fn, warp_sensitive)
        return fn
    return reg


@kernel()
def dot(L, ws, a, b, result, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i < n:
            result[0] = s32(result[0] + s32(a[i] * b[i]))


@kernel()
def vector_add(L, ws, a, b, c, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i < n:
            c[i] = s32(a[i] + b[i])


@kernel()
def saxpy_s32(L, ws, n, a, x, y):
    for t in all_threads(L):
        i = s32(gid(t))
        if i < n:
            y[i] = s32(a * x[i] + y[i])


@kernel()
def saxpy_f32(L, ws, n, a, x, y):
    # nvcc and clang both contract a * x[i] + y[i] into fma.rn.f32 (one rounding)
    for t in all_threads(L):
        i = s32(gid(t))
        if i < n:
            y[i] = fma_f32(a, x[i], y[i])


@kernel()
def reduce_shared(L, ws, inp, out):
    for c in ctas(L):
        th = cta_threads(L, c)
        nt = len(th)
        s = [None] * 8
        for t in th:                              # before the first barrier
            s[t.tid[0]] = inp[c[0] * nt + t.tid[0]]
        stride = nt // 2
        while stride > 0:                         # one barrier interval per step
            new = list(s)
            for t in th:
                if t.tid[0] < stride:
                    new[t.tid[0]] = s32(s[t.tid[0]] + s[t.tid[0] + stride])
            s = new
            stride >>= 1
        out[c[0]] = s[0]


@kernel(warp_sensitive=True)
def warp_reduce_shfl(L, ws, inp, out):
    for c in ctas(L):
        th = cta_threads(L, c)
        nt = len(th)
        v = [inp[t.tid[0]] for t in th]
        off = ws // 2
        while off > 0:
            new = list(v)
            for t in th:
                T = t.tid[0]
                lane = T % ws
                src = lane + off
                if src > ws - 1:                  # shfl.down past the last lane: own value
                    o = v[T]
                elif T - lane + src < nt:
                    o = v[T - lane + src]
                else:
                    o = None                      # a lane the block does not have
                if T + off < nt:
                    assert o is not None
                    new[T] = s32(v[T] + o)
            v = new
            off //= 2
        for t in th:
            if t.tid[0] % ws == 0:
                out[t.tid[0] // ws] = v[t.tid[0]]


@kernel()
def histogram_atomic(L, ws, data, hist, nbins, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i < n:
            k = data[i] % nbins
            hist[k] = u32(hist[k] + 1)


@kernel()
def inclusive_scan(L, ws, inp, out):
    for c in ctas(L):
        th = cta_threads(L, c)
        nt = len(th)
        s = [inp[t.tid[0]] for t in th]
        off = 1
        while off < nt:
            v = [s[t.tid[0] - off] if t.tid[0] >= off else 0 for t in th]   # reads, then barrier
            s = [s32(s[k] + v[k]) for k in range(nt)]                       # writes, then barrier
            off <<= 1
        for t in th:
            out[t.tid[0]] = s[t.tid[0]]


@kernel()
def matmul4x4(L, ws, A, B, C):
    for t in all_threads(L):
        row, col = t.tid[1], t.tid[0]
        acc = 0
        for k in range(4):
            acc = s32(acc + s32(A[row * 4 + k] * B[k * 4 + col]))
        C[row * 4 + col] = acc


@kernel()
def branchy(L, ws, inp, out, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        x = inp[i]
        if x < 0:
            out[i] = s32(-x * 10)
            continue
        steps = 0
        while x > 1 and steps < 16:
            x = s32(3 * x + 1) if x & 1 else x >> 1
            steps += 1
        out[i] = s32(steps * 100 + x)


def popc(x):
    return bin(x).count("1")


def clz(x):
    return 32 - x.bit_length()


def brev(x):
    return int(format(x, "032b")[::-1], 2)


def ffs(x):
    return (x & -x).bit_length()


@kernel()
def bit_tricks(L, ws, inp, out):
    for t in all_threads(L):
        x = inp[t.tid[0]]
        o = out + 8 * t.tid[0]
        o[0] = popc(x)
        o[1] = clz(x)
        o[2] = brev(x)
        o[3] = ffs(x)
        o[4] = (x >> 5) & 0x3FF
        o[5] = x ^ (x >> 1)
        o[6] = x & u32(-x)
        o[7] = u32((x << 7) | (x >> 25))


#: prmt's modes from the PTX ISA's table: c[1:0] → the source byte of
#: result bytes 3, 2, 1, 0 (sources 0-3 are a's bytes, 4-7 b's).
PRMT_MODE_TABLE = {
    "f4e": ["3210", "4321", "5432", "6543"], "b4e": ["5670", "6701", "7012", "0123"],
    "rc8": ["0000", "1111", "2222", "3333"], "ecl": ["3210", "3211", "3222", "3333"],
    "ecr": ["0000", "1110", "2210", "3210"], "rc16": ["1010", "3232", "1010", "3232"],
}


def byte_perm(a, b, c, mode=None):
    """PTX prmt.b32 (CUDA's __byte_perm is its default mode)."""
    source = [(a >> 8 * k) & 0xFF for k in range(4)] + [(b >> 8 * k) & 0xFF for k in range(4)]
    result = 0
    for i in range(4):
        if mode is None:
            nibble = (c >> 4 * i) & 0xF
            byte = source[nibble % 8]
            if nibble >= 8:                 # replicate the byte's sign bit
                byte = 0xFF if byte >= 0x80 else 0x00
        else:
            byte = source[int(PRMT_MODE_TABLE[mode][c % 4][3 - i])]
        result += byte << 8 * i
    return result


@kernel()
def byte_permute(L, ws, x, y, sel, out, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        a, b, s = x[i], y[i], sel[i]
        r = [byte_perm(a, 0, 0x0123), byte_perm(a, a, 0x2107), byte_perm(a, b, 0x6240),
             byte_perm(a, b, s & 0x7777), byte_perm(a, b, s)]
        r += [byte_perm(a, b, s, mode) for mode in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")]
        for k, v in enumerate(r):
            out[11 * i + k] = v


@kernel()
def pointer_arith64(L, ws, src, dst, n):
    for t in all_threads(L):
        i = u64(t.ctaid[0] * t.ntid[0] + t.tid[0])
        if i >= n:
            continue
        p = src + i
        v = s64(p[0] - p[-2] + s64(u64(i << 33)))
        q = dst + u64(n - 1 - i)
        q[0] = v


@kernel()
def divrem_signed(L, ws, a, b, q, r, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        x, y = a[i], b[i]
        if y == 0:
            q[i] = 0
            r[i] = x
            continue
        assert not (x == -2**31 and y == -1)
        qq = trunc_div(x, y)
        q[i] = qq
        r[i] = x - qq * y


@kernel()
def minmax_abs(L, ws, a, b, out, uout):
    for t in all_threads(L):
        T = t.tid[0]
        x, y = a[T], b[T]
        o = out + 6 * T
        o[0] = min(x, y)
        o[1] = max(x, y)
        assert x != -2**31
        o[2] = abs(x)
        o[3] = s32(-y)
        o[4] = max(-3, min(x, 3))
        o[5] = s32(y - x) if x < y else s32(x - y)
        ux, uy = u32(x), u32(y)
        uout[T] = min(ux, uy)


@kernel()
def bytes_u8(L, ws, inp, out, sout, wide, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        c = inp[i]
        s = wrap(c, "s8")
        out[i] = wrap(c * 3 + 7, "u8")
        sout[i] = wrap(s >> 2, "s8")
        wide[i] = wrap(s * 300, "s16")


@kernel(warp_sensitive=True)
def vote_ballot(L, ws, inp, out):
    for c in ctas(L):
        th = cta_threads(L, c)
        nt = len(th)
        pred = [inp[t.tid[0]] > 0 for t in th]
        for w in range((nt + ws - 1) // ws):
            lanes = range(w * ws, min(nt, (w + 1) * ws))   # only lanes the block has
            ballot = sum(1 << (T - w * ws) for T in lanes if pred[T])
            anyp = int(any(pred[T] for T in lanes))
            allp = int(all(pred[T] for T in lanes))
            o = out + 4 * w
            o[0] = ballot
            o[1] = anyp
            o[2] = allp
            o[3] = popc(ballot)


@kernel()
def float_ops(L, ws, a, b, out):
    for t in all_threads(L):
        T = t.tid[0]
        x, y = a[T], b[T]
        o = out + 8 * T
        o[0] = checked("+", x, y)
        o[1] = checked("-", x, y)
        o[2] = checked("*", x, y)
        o[3] = checked("/", x, y)
        o[4] = f32(np.sqrt(f32(abs(x))))
        o[5] = fma_f32(x, y, f32(0.5))
        o[6] = f32(max(x, y))
        o[7] = f32(-1.0) if x < y else f32(2.0)


@kernel()
def mulhi_wide(L, ws, a, b, hi_u, hi_s, lo, wide_u, wide_s):
    for t in all_threads(L):
        T = t.tid[0]
        x, y = a[T], b[T]
        sx, sy = s32(x), s32(y)
        hi_u[T] = (x * y) >> 32
        hi_s[T] = (sx * sy) >> 32          # arithmetic shift = high word of the 64-bit product
        lo[T] = u32(x * y)
        wide_u[T] = x * y
        wide_s[T] = sx * sy


@kernel()
def grid_stride(L, ws, inp, out, width, height):
    for t in all_threads(L):
        row = t.ctaid[1] * t.ntid[1] + t.tid[1]
        if row >= height:
            continue
        col = t.ctaid[0] * t.ntid[0] + t.tid[0]
        while col < width:
            out[row * width + col] = s32(inp[row * width + col] * 2 + row)
            col += t.ntid[0] * t.nctaid[0]


@kernel()
def reverse_dynshared(L, ws, d, n):
    assert L.get("dynamic_shared_bytes", 0) >= 4 * n
    for c in ctas(L):
        th = cta_threads(L, c)
        s = [None] * n
        for t in th:
            if t.tid[0] < n:
                s[t.tid[0]] = d[t.tid[0]]
        for t in th:                              # after the barrier
            if t.tid[0] < n:
                d[t.tid[0]] = s[n - 1 - t.tid[0]]


@kernel()
def convert_f32(L, ws, xi, xf, of, oi):
    for t in all_threads(L):
        T = t.tid[0]
        i, f = xi[T], xf[T]
        of[3 * T + 0] = round_f32(i)
        of[3 * T + 1] = round_f32(u32(i))
        of[3 * T + 2] = f32(math.floor(float(f)))
        assert -2**31 <= float(f) < 2**31
        oi[3 * T + 0] = int(float(f))                 # truncation toward zero
        oi[3 * T + 1] = round(float(f))               # Python rounds half to even
        oi[3 * T + 2] = int(np.array(f, dtype=np.float32).view(np.int32))


# --- warp-level and data-structure kernels (integer) ---------------------------------


def warps_of(th, ws):
    """The CTA's warps: lists of threads with consecutive linear ids (only lanes it has)."""
    nt = len(th)
    return [th[w * ws:min(nt, (w + 1) * ws)] for w in range((nt + ws - 1) // ws)]


@kernel(warp_sensitive=True)
def warp_agg_atomic(L, ws, inp, count, hits, rank):
    for c in ctas(L):
        for warp in warps_of(cta_threads(L, c), ws):
            xs = [inp[t.tid[0]] for t in warp]
            mask = sum(1 << lane for lane, x in enumerate(xs) if x > 0)
            base = 0
            if mask:                                   # the leader's atomicAdd, one per warp
                base = count[0]
                count[0] = u32(count[0] + popc(mask))
            for lane, t in enumerate(warp):
                r = popc(mask & ((1 << lane) - 1))
                if xs[lane] > 0:
                    hits[base + r] = u32(hits[base + r] + 1)
                rank[t.tid[0]] = r if xs[lane] > 0 else -1 - lane


@kernel(warp_sensitive=True)
def warp_agg_laneid(L, ws, inp, hist, natomics, leader_of):
    for c in ctas(L):
        for warp in warps_of(cta_threads(L, c), ws):
            keys = [inp[t.tid[0]] & 3 for t in warp]
            todo = (1 << len(warp)) - 1                # __activemask(): the lanes the warp has
            while todo:
                leader = ffs(todo) - 1
                k = keys[leader]
                peers = sum(1 << lane for lane, key in enumerate(keys) if key == k)
                hist[k] = u32(hist[k] + popc(peers))
                natomics[0] = u32(natomics[0] + 1)
                for lane, t in enumerate(warp):
                    if keys[lane] == k:
                        leader_of[t.tid[0]] = leader
                todo &= ~peers


@kernel(warp_sensitive=True)
def rank_lanemask(L, ws, inp, out, wcount):
    for c in ctas(L):
        for warp in warps_of(cta_threads(L, c), ws):
            xs = [inp[t.tid[0]] for t in warp]
            keep = sum(1 << lane for lane, x in enumerate(xs) if x < 0)
            start = warp[0].tid[0]
            for lane in range(len(warp)):
                if keep >> lane & 1:
                    r = popc(keep & ((2 << lane) - 1))
                    out[start + r - 1] = xs[lane]
                    if r == popc(keep):
                        wcount[start] = r


@kernel()
def aos_soa(L, ws, kv, keys, vals, swapped, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        key, val = kv[2 * i], kv[2 * i + 1]
        keys[i] = key
        vals[i] = s32(val - key)
        swapped[2 * i] = val
        swapped[2 * i + 1] = s32(key * 2)


@kernel()
def int4_vec(L, ws, a, b, mx, diff, hsum):
    for t in all_threads(L):
        i = gid(t)
        x = [a[4 * i + k] for k in range(4)]
        y = [b[4 * i + k] for k in range(4)]
        for k in range(4):
            mx[4 * i + k] = max(x[k], y[k])
            diff[4 * i + k] = s32(x[k] - y[k])
        hsum[i] = s32(sum(x))


@kernel()
def stream_compact(L, ws, inp, out, count, n):
    for c in ctas(L):
        th = cta_threads(L, c)
        s_idx = [None] * 16
        for t in th:                              # atomicAdd order does not change the result
            i = t.tid[0]
            if i < n and inp[i] > 0:
                slot = count[0]
                count[0] = s32(count[0] + 1)
                s_idx[slot] = i
        cnt = count[0]
        for t in th:                              # after the barrier
            i = t.tid[0]
            if i < cnt:
                mine = s_idx[i]
                r = sum(1 for j in range(cnt) if s_idx[j] < mine)
                out[r] = inp[mine]


@kernel()
def radix_split(L, ws, keys, vals, okeys, ovals, bit):
    for c in ctas(L):
        th = cta_threads(L, c)
        n = len(th)
        f = [(keys[t.tid[0]] >> bit) & 1 for t in th]
        incl = [sum(f[:k + 1]) for k in range(n)]
        zeros = n - incl[n - 1]
        for t in th:
            T = t.tid[0]
            ones_before = incl[T] - f[T]
            dst = zeros + ones_before if f[T] else T - ones_before
            okeys[dst] = keys[T]
            ovals[dst] = vals[T]


@kernel()
def bitonic_shared(L, ws, data):
    for c in ctas(L):
        th = cta_threads(L, c)
        n = len(th)
        s = [data[t.tid[0]] for t in th]
        k = 2
        while k <= n:
            j = k >> 1
            while j > 0:                          # one barrier interval per (k, j)
                new = list(s)
                for T in range(n):
                    p = T ^ j
                    if p > T:
                        a, b = s[T], s[p]
                        up = (T & k) == 0
                        if (a > b) == up:
                            new[T], new[p] = b, a
                s = new
                j >>= 1
            k <<= 1
        for t in th:
            data[t.tid[0]] = s[t.tid[0]]


@kernel()
def csr_spmv(L, ws, row_ptr, col_idx, vals, x, y, nrows):
    for t in all_threads(L):
        row = s32(gid(t))
        if row >= nrows:
            continue
        acc = 0
        for k in range(row_ptr[row], row_ptr[row + 1]):
            acc = s32(acc + s32(vals[k] * x[col_idx[k]]))
        y[row] = acc


@kernel()
def bfs_frontier(L, ws, row_ptr, adj, frontier, nfront, level, parent, nxt, next_count, cur):
    for c in ctas(L):
        th = cta_threads(L, c)
        s_next = []
        for t in th:                              # CAS winners differ by order, the sets do not
            if t.tid[0] < nfront:
                u = frontier[t.tid[0]]
                for e in range(row_ptr[u], row_ptr[u + 1]):
                    v = adj[e]
                    old = level[v]
                    if old == -1:
                        level[v] = cur + 1
                        s_next.append(v)
                    if old == -1 or old == cur + 1:
                        parent[v] = min(parent[v], u)
        for r, v in enumerate(sorted(s_next)):    # rank of each appended node
            nxt[r] = v
        next_count[0] = len(s_next)


@kernel()
def fnv1a64(L, ws, inp, out, hi, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        x = inp[i]
        h = 0xcbf29ce484222325
        for b in range(4):
            h ^= (x >> (8 * b)) & 0xFF
            h = u64(h * 0x100000001b3)
        out[i] = h
        hi[i] = h >> 32


@kernel()
def splitmix64(L, ws, inp, out, xall, seed):
    for t in all_threads(L):
        i = gid(t)
        z = u64(seed + inp[i] * 0x9e3779b97f4a7c15)
        z = u64((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9)
        z = u64((z ^ (z >> 27)) * 0x94d049bb133111eb)
        z ^= z >> 31
        out[i] = z
        xall[0] = xall[0] ^ z


@kernel()
def atomic64_accum(L, ws, inp, total, smin, smax, umin, umax):
    for t in all_threads(L):
        x = inp[gid(t)]
        w = x * (1 << 20)                         # (long long)x << 20: no overflow
        total[0] = u64(total[0] + u64(x))         # sign-extended, wraps mod 2^64
        smin[0] = min(smin[0], w)
        smax[0] = max(smax[0], w)
        umin[0] = min(umin[0], u64(w))
        umax[0] = max(umax[0], u64(w))


@kernel()
def atomic64_cas_exch(L, ws, inp, prod, slots, olds, cas):
    for t in all_threads(L):
        i = t.tid[0]
        x = inp[i]
        prod[0] = u64(prod[0] * x)                # the CAS loop: an atomic multiply (commutes)
        olds[i] = slots[i]
        slots[i] = x ^ 0xffffffff00000000
        seen = cas[i]
        if seen == x & 0xF:
            cas[i] = x
        else:
            cas[i] = u64(seen + 1)


@kernel()
def pack_bytes(L, ws, inp, packed, rev, swapped, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        b = [inp[4 * i + k] for k in range(4)]
        w = b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24
        packed[i] = w
        rev[4 * i + 0] = b[3]
        rev[4 * i + 1] = b[2]
        rev[4 * i + 2] = b[1]
        rev[4 * i + 3] = wrap(b[0] + b[3], "u8")
        swapped[2 * i] = int.from_bytes(w.to_bytes(4, "little"), "big")
        swapped[2 * i + 1] = 0


@kernel()
def shared_u8_flags(L, ws, inp, seen_out, counts, distinct):
    for c in ctas(L):
        th = cta_threads(L, c)
        keys = [inp[t.tid[0]] & 15 for t in th]
        seen = [0] * 16
        for k in keys:
            seen[k] = 1
        for t in th:
            T = t.tid[0]
            counts[T] = sum(1 for k in keys if k == T)
            seen_out[T] = 0x80 | T if seen[T] else 0
        distinct[0] = sum(seen)


@kernel()
def shared_s16(L, ws, inp, uin, diff, sat, uout):
    for c in ctas(L):
        th = cta_threads(L, c)
        n = len(th)
        s = [inp[t.tid[0]] for t in th]
        for t in th:
            T = t.tid[0]
            diff[T] = s[(T + 1) % n] - s[T]
            w = s[T] * 2 + uin[T]
            sat[T] = max(-32768, min(32767, w))
            uout[T] = wrap(uin[T] + s[T], "u16")


@kernel()
def last_block_reduce(L, ws, inp, partial, count, total):
    g = L["grid"][0]
    for c in ctas(L):
        th = cta_threads(L, c)
        b = c[0]
        partial[b] = s32(sum(inp[b * len(th) + t.tid[0]] for t in th))   # wraps like the tree
        ticket = count[0]                          # atomicInc(count, g - 1)
        count[0] = 0 if ticket >= g - 1 else ticket + 1
        if ticket == g - 1:
            total[0] = s32(sum(partial[k] for k in range(g)))


@kernel()
def linked_list(L, ws, nodes, head, total, length):
    for t in all_threads(L):
        T = t.tid[0]
        h = head[T]
        p = h if h >= 0 else None
        s = l = 0
        while p is not None and l < 8:
            s = s32(s + nodes[2 * p])
            l += 1
            nx = nodes[2 * p + 1]
            p = nx if nx >= 0 else None
        total[T] = s
        length[T] = l


@kernel()
def local_hist(L, ws, inp, out, n):
    for t in all_threads(L):
        T = gid(t)
        bins = [0] * 8
        for i in range(n):
            bins[inp[T * n + i] & 7] += 1
        best = max(range(8), key=lambda k: (bins[k], -k))
        out[T] = best * 100 + bins[best]


@kernel()
def local_sort(L, ws, rows, length, out, mid):
    for t in all_threads(L):
        T = t.tid[0]
        m = length[T]
        v = sorted(rows[6 * T + k] if k < m else 0x7FFFFFFF for k in range(6))
        for k in range(6):
            out[6 * T + k] = v[k]
        mid[T] = s32(v[2] + v[3])


@kernel()
def pointer_select(L, ws, a, b, sel, out):
    for c in ctas(L):
        th = cta_threads(L, c)
        n = len(th)

        def target(s):                # (buffer, index) or None for null
            return None if s == 0 else (a, s - 1) if s > 0 else (b, -s - 1)
        for t in th:
            T = t.tid[0]
            p = target(sel[(T + 1) % n])
            out[T] = -1 if p is None else p[0][p[1]]
        for t in th:                  # after the second barrier
            T = t.tid[0]
            s = sel[(T + 1) % n]
            if s < 0:
                b[-s - 1] = s32(b[-s - 1] + 100)


@kernel()
def pointer_table(L, ws, base, sel, out):
    for c in ctas(L):
        th = cta_threads(L, c)
        table = [4 * (3 - k) for k in range(4)]   # element offsets into base
        for t in th:
            T = t.tid[0]
            row = table[sel[T] & 3]
            out[T] = s32(base[row + (T & 3)] + base[row + ((T + 1) & 3)])
        for t in th:                              # after the second barrier
            T = t.tid[0]
            if T < 4:
                base[table[T] + T] = s32(-base[table[T] + T])


@kernel(warp_sensitive=True)
def shfl_xor_warpid(L, ws, inp, total, mx, nbr, info):
    for c in ctas(L):
        th = cta_threads(L, c)
        warps = warps_of(th, ws)
        for warp in warps:
            width = len(warp)                     # __popc(__activemask())
            assert width & (width - 1) == 0
            v = [inp[t.tid[0]] for t in warp]
            m = list(v)
            k = 1
            while k < width:
                v = [s32(v[l] + v[l ^ k]) for l in range(width)]
                m = [max(m[l], m[l ^ k]) for l in range(width)]
                k <<= 1
            for l, t in enumerate(warp):
                total[t.tid[0]] = v[l]
                mx[t.tid[0]] = m[l]
                nbr[t.tid[0]] = s32(inp[t.tid[0] ^ 1] * 10)
        for t in th:
            # %warpid < %nwarpid, and one %warpid per warp: bits 0 and 1; the count of
            # distinct warps from the atomicOr'd bitmask in bits 2 and up
            info[t.tid[0]] = 1 | 2 | len(warps) << 2


@kernel()
def grid_stride64(L, ws, inp, out, sq, n):
    threads = list(all_threads(L))
    stride = len(threads)
    for t in threads:
        first = gid(t)
        acc = 0
        i = first
        while i < n:
            x = inp[i]
            out[i] = s32(x * 3 - i)
            acc = s64(acc + x * x)
            i += stride
        sq[first] = acc


@kernel()
def warp_scan_shfl(L, ws, inp, out):
    for c in ctas(L):
        th = cta_threads(L, c)
        warps = warps_of(th, ws)
        width = len(warps[0])
        assert all(len(w) == width for w in warps)
        vals, wtot = {}, []
        for warp in warps:
            v = [inp[t.tid[0]] for t in warp]
            off = 1
            while off < width:                    # __shfl_up_sync, added where lane >= off
                v = [s32(v[l] + v[l - off]) if l >= off else v[l] for l in range(width)]
                off <<= 1
            wtot.append(v[width - 1])
            for l, t in enumerate(warp):
                vals[t.tid[0]] = v[l]
        for t in th:
            w = t.tid[0] // width
            out[t.tid[0]] = s32(vals[t.tid[0]] + sum(wtot[:w]))


@kernel()
def transpose_pad(L, ws, inp, out, rows, cols):
    for c in ctas(L):
        th = cta_threads(L, c)
        bx, by = c[0], c[1]
        tile = [[None] * 5 for _ in range(4)]
        for t in th:
            tx, ty = t.tid[0], t.tid[1]
            x, y = bx * 4 + tx, by * 4 + ty
            if x < cols and y < rows:
                tile[ty][tx] = inp[y * cols + x]
        for t in th:                              # after the barrier
            tx, ty = t.tid[0], t.tid[1]
            ox, oy = by * 4 + tx, bx * 4 + ty
            if ox < rows and oy < cols:
                out[oy * rows + ox] = tile[tx][ty]


@kernel()
def run_length(L, ws, a, vals, lens, nruns):
    for c in ctas(L):
        th = cta_threads(L, c)
        n = len(th)
        x = [a[t.tid[0]] for t in th]
        head = [int(T == 0 or x[T] != x[T - 1]) for T in range(n)]
        incl = [sum(head[:T + 1]) for T in range(n)]
        total = incl[n - 1]
        start = [None] * 17
        for T in range(n):
            if head[T]:
                start[incl[T] - 1] = T
                vals[incl[T] - 1] = x[T]
        start[total] = n
        nruns[0] = total
        for T in range(n):
            if head[T]:
                lens[incl[T] - 1] = start[incl[T]] - T



def half_bits_to_f32(bits):
    return np.array([bits], dtype=np.uint16).view(np.float16).astype(np.float32)[0]


def f32_to_half_bits(x):
    """__float2half: round to nearest even, too large to infinity."""
    with np.errstate(over="ignore"):
        return int(np.array([x], dtype=np.float32).astype(np.float16).view(np.uint16)[0])


def bf16_to_f32(bits):
    return np.array([bits << 16], dtype=np.uint32).view(np.float32)[0]


def f32_to_bf16_bits(x):
    """__float2bfloat16: round to nearest even on the top 16 bits; NaN 0x7FFF."""
    bits = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    if math.isnan(float(x)):
        return 0x7FFF
    return (bits + 0x7FFF + (bits >> 16 & 1)) >> 16


@kernel()
def half_mix(L, ws, h, b, n, hout, bout, mean, rounded, scaled, length):
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= length:
            continue
        x, y = half_bits_to_f32(h[i]), bf16_to_f32(b[i])
        hout[i] = f32_to_half_bits(fma_f32(x, y, f32(0.25)))      # contracted: fma.rn.f32
        bout[i] = f32_to_bf16_bits(checked("-", x, y))
        mean[i] = checked("/", checked("+", x, y), round_f32(Fraction(n[i])))
        rounded[i] = round(float(checked("*", x, f32(1000.0))))   # llrintf: ties to even
        scaled[i] = int(float(checked("*", abs(y), f32(4096.0))))


@kernel()
def rmsnorm_f(L, ws, x, weight, y, rows, cols, eps):
    for t in all_threads(L):
        row = s32(gid(t))
        if row >= rows:
            continue
        xr = [x[row * cols + c] for c in range(cols)]
        sum_sq = f32(0.0)
        for v in xr:                                # contracted: fma.rn.f32, in order
            sum_sq = fma_f32(v, v, sum_sq)
        mean = checked("/", sum_sq, f32(cols))      # (float)cols: exact
        root = f32(np.sqrt(checked("+", mean, eps)))    # sqrt.rn: IEEE, correctly rounded
        inv = checked("/", f32(1.0), root)          # nvcc: rcp.rn; clang: rsqrt.approx, which
        for c in range(cols):                       # the machine defines as rcp.rn(sqrt.rn)
            y[row * cols + c] = checked("*", checked("*", xr[c], inv), weight[c])


@kernel()
def conv_const(L, ws, x, y, n):
    taps = [f32(0.0625), f32(0.25), f32(0.375), f32(0.25), f32(0.0625)]
    bias = f32(-48.0 / 256.0)                       # exact: a short over a power of two
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        xs = [x[min(max(i + k - 2, 0), n - 1)] for k in range(5)]
        # both compilers: the first product rounded, the bias added by an fma
        # (bias * 2^-8 + product, exact before its one rounding), then one fma per tap
        s = checked("+", bias, checked("*", taps[0], xs[0]))
        for k in range(1, 5):
            s = fma_f32(taps[k], xs[k], s)
        y[i] = s


@kernel()
def uniform_loads(L, ws, coef, x, out, n):
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        v = x[i]
        acc = s32(coef[0] * v + coef[1])
        acc = s32(acc + coef[2 + (v & 3)])            # the loop ends at i = v & 3
        acc = s32(acc + coef[(1 if v & 4 else 2) + 3])
        acc = s32(acc + coef[7]) if t.tid[0] & 1 else s32(acc - coef[6])
        for k in range((v & 1) + 1):
            acc ^= s32(coef[8 + k] << k)
        out[i] = acc

def fma_f64(a, b, c):
    """fma.rn.f64: a*b+c rounded once (int / int division in Python rounds
    correctly to the nearest double)."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def trunc_sat(x, bits, signed=True):
    """cvt.rzi.{s,u}N.f64: toward zero, saturated to the type; NaN to 0."""
    if math.isnan(x):
        return 0
    lo, hi = (-(1 << bits - 1), (1 << bits - 1) - 1) if signed else (0, (1 << bits) - 1)
    if math.isinf(x):
        return hi if x > 0 else lo
    return min(max(math.trunc(x), lo), hi)


@kernel()
def double_literals(L, ws, x, k, y, q, n):
    # double literals promote to f64: both compilers contract a * lit + b
    # into fma.rn.f64; f64 → f32 rounds to nearest (numpy's float32 cast)
    for t in all_threads(L):
        i = s32(gid(t))
        if i >= n:
            continue
        v = float(x[i])
        y[4 * i + 0] = f32(fma_f64(v, 0.5, 0.25))
        y[4 * i + 1] = f32(v - 0.1) if v > 0.1 else f32(fma_f64(v, 1.1, 1e-3))
        y[4 * i + 2] = f32(float(k[i]) * 0.001)
        s = 0.0
        for j in range(i + 1):
            s = fma_f64(float(x[j]), 0.3, s)
        y[4 * i + 3] = f32(max(s, -1.5))
        q[2 * i + 0] = trunc_sat(v * 100.0, 32)
        q[2 * i + 1] = s32(u32(trunc_sat(s * -7.25, 64)) + trunc_sat(float(k[i]) * 2.5, 32))


@kernel()
def device_globals(L, ws, inp, out, total, n):
    lut = [7, -3, 12, 0, 5, 99, -41, 8, 2, 64, -1, 33, 17, -8, 4, 21]   # __constant__
    weight = [3, 1, 4, 1, 5, 9, 2, 6]                                   # __device__ bytes
    bias = [100, -100]
    d_total = 0                                   # a __device__ int, zero at the start
    for t in all_threads(L):
        i, v = t.tid[0], 0
        if i < n:
            x = inp[i]
            v = s32(lut[x & 15] * weight[(x >> 4) & 7] + bias[i & 1])
            out[i] = v
        d_total = s32(d_total + v)                # atomicAdd: the order does not matter
    total[0] = d_total                            # thread 0, after the barrier


# ---------------------------------------------------------------------------


def run(name, ws):
    with open(os.path.join(HERE, name, "launch.json")) as fh:
        launch = json.load(fh)
    assert launch["kernel"] == name
    fn, _ = KERNELS[name]
    args, bufs = make_args(launch)
    fn(launch, ws, *args)
    return result_json(bufs)


def dump(obj):
    return json.dumps(obj) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    dirs = sorted(d for d in os.listdir(HERE)
                  if os.path.isfile(os.path.join(HERE, d, "launch.json")))
    missing = set(dirs) ^ set(KERNELS)
    if missing:
        sys.exit(f"no model or no launch.json for: {', '.join(sorted(missing))}")
    bad = 0
    for name in dirs:
        _, sensitive = KERNELS[name]
        files = {"expected.json": dump(run(name, 4))}
        w32 = dump(run(name, 32))
        if w32 != files["expected.json"]:
            assert sensitive, f"{name}: result depends on warp size but is not marked so"
            files["expected_warp32.json"] = w32
        for fname, text in files.items():
            path = os.path.join(HERE, name, fname)
            if check:
                old = open(path).read() if os.path.exists(path) else None
                if old != text:
                    print(f"{name}/{fname}: differs")
                    bad += 1
            else:
                with open(path, "w") as fh:
                    fh.write(text)
        stale = os.path.join(HERE, name, "expected_warp32.json")
        if "expected_warp32.json" not in files and os.path.exists(stale):
            if check:
                print(f"{name}/expected_warp32.json: stale")
                bad += 1
            else:
                os.remove(stale)
        print(f"{name}: " + ", ".join(sorted(files)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
