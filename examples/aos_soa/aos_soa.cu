// aos_soa: array of structs {int key; int val;} to struct of arrays (keys[], vals[]) and back swapped through int2 loads and stores; guard i < n.
struct KV { int key; int val; };
extern "C" __global__ void aos_soa(const KV *kv, int *keys, int *vals, int *swapped, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    KV e = kv[i];
    keys[i] = e.key;
    vals[i] = e.val - e.key;
    int2 p = reinterpret_cast<const int2 *>(kv)[i];
    reinterpret_cast<int2 *>(swapped)[i] = make_int2(p.y, p.x * 2);
}
