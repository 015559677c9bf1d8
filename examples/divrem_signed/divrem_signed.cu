// divrem_signed: q[i] = a[i] / b[i] and r[i] = a[i] % b[i] (truncating toward zero); b == 0 gives q = 0, r = a.
extern "C" __global__ void divrem_signed(const int *a, const int *b, int *q, int *r, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int x = a[i], y = b[i];
    if (y == 0) {
        q[i] = 0;
        r[i] = x;
        return;
    }
    q[i] = x / y;
    r[i] = x % y;
}
