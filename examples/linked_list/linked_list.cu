// linked_list: nodes {val, next} in global memory; the block builds node pointers in a __shared__ array, then each thread walks the list from its head through them (sum, length).
struct Node { int val; int next; };
extern "C" __global__ void linked_list(const Node *nodes, const int *head, int *sum, int *len)
{
    __shared__ const Node *link[8];
    unsigned t = threadIdx.x;
    int nx = nodes[t].next;
    link[t] = nx >= 0 ? nodes + nx : nullptr;
    __syncthreads();
    int h = head[t], s = 0, l = 0;
    const Node *p = h >= 0 ? nodes + h : nullptr;
    while (p != nullptr && l < 8) {
        s += p->val;
        l++;
        p = link[p - nodes];
    }
    sum[t] = s;
    len[t] = l;
}
