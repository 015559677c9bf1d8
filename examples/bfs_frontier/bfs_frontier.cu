// bfs_frontier: one BFS level: each frontier node visits its CSR neighbours, atomicCAS claims level[v], atomicMin records the smallest parent, atomicAdd appends to the next frontier (sorted by rank at the end).
extern "C" __global__ void bfs_frontier(const int *row_ptr, const int *adj, const int *frontier, int nfront,
                                        int *level, int *parent, int *next, int *next_count, int cur)
{
    __shared__ int s_next[8];
    __shared__ int s_count;
    unsigned t = threadIdx.x;
    if (t == 0)
        s_count = 0;
    __syncthreads();
    if (t < (unsigned)nfront) {
        int u = frontier[t];
        for (int e = row_ptr[u]; e < row_ptr[u + 1]; e++) {
            int v = adj[e];
            int old = atomicCAS(&level[v], -1, cur + 1);
            if (old == -1)
                s_next[atomicAdd(&s_count, 1)] = v;
            if (old == -1 || old == cur + 1)
                atomicMin(&parent[v], u);
        }
    }
    __syncthreads();
    int c = s_count;
    if (t < (unsigned)c) {
        int v = s_next[t], r = 0;
        for (int j = 0; j < c; j++)
            r += s_next[j] < v;
        next[r] = v;
    }
    if (t == 0)
        *next_count = c;
}
