// run_length: run-length encoding: head flags a[i] != a[i-1], a shared-memory scan gives run ids, heads scatter value and start, lengths from the next start.
extern "C" __global__ void run_length(const int *a, int *vals, int *lens, int *nruns)
{
    __shared__ int s[16];
    __shared__ int start[17];
    int t = threadIdx.x, n = blockDim.x;
    int x = a[t];
    int head = t == 0 || x != a[t - 1];
    s[t] = head;
    __syncthreads();
    for (int off = 1; off < n; off <<= 1) {
        int v = t >= off ? s[t - off] : 0;
        __syncthreads();
        s[t] += v;
        __syncthreads();
    }
    int id = s[t] - 1;
    int total = s[n - 1];
    if (head) {
        start[id] = t;
        vals[id] = x;
    }
    if (t == 0) {
        start[total] = n;
        *nruns = total;
    }
    __syncthreads();
    if (head)
        lens[id] = start[id + 1] - t;
}
