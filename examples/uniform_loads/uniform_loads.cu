// Loads whose address is the same on every lane of a warp next to loads whose
// address only looks alike: the uniformity analysis must tell them apart.
extern "C" __global__ void uniform_loads(const int *coef, const int *x, int *out, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int v = x[t];
    int acc = coef[0] * v + coef[1];          // uniform: a parameter's address
    int i = 0;
    while (i < (v & 3)) i++;                  // a trip count per lane
    acc += coef[2 + i];                       // one register, a different word per lane
    const int *p = (v & 4) ? coef + 1 : coef + 2;
    acc += p[3];                              // a base picked per lane
    if (threadIdx.x & 1) acc += coef[7];      // uniform addresses in diverged branches
    else acc -= coef[6];
    for (int k = 0; k < (v & 1) + 1; k++)     // a uniform base, a per-lane loop
        acc ^= coef[8 + k] << k;
    out[t] = acc;
}
