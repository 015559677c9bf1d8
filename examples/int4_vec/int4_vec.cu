// int4_vec: int4 loads and stores (reinterpret_cast<int4*>): elementwise max and difference of two int4 arrays and a horizontal sum per thread.
extern "C" __global__ void int4_vec(const int *a, const int *b, int *mx, int *diff, int *hsum)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int4 x = reinterpret_cast<const int4 *>(a)[i];
    int4 y = reinterpret_cast<const int4 *>(b)[i];
    reinterpret_cast<int4 *>(mx)[i] = make_int4(max(x.x, y.x), max(x.y, y.y), max(x.z, y.z), max(x.w, y.w));
    reinterpret_cast<int4 *>(diff)[i] = make_int4(x.x - y.x, x.y - y.y, x.z - y.z, x.w - y.w);
    hsum[i] = x.x + x.y + x.z + x.w;
}
