// local_sort: each thread insertion-sorts its row of six values in a local array (a data-dependent
// shift loop), writes the sorted row back, and the median pair's sum (wrapping); short rows (len < 6) are
// padded with INT_MAX.
extern "C" __global__ void local_sort(const int *rows, const int *len, int *sorted, int *mid)
{
    int v[6];
    unsigned t = threadIdx.x;
    int m = len[t];
    for (int k = 0; k < 6; k++)
        v[k] = k < m ? rows[6 * t + k] : 0x7fffffff;
    for (int i = 1; i < 6; i++) {
        int x = v[i], j = i - 1;
        while (j >= 0 && v[j] > x) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = x;
    }
    for (int k = 0; k < 6; k++)
        sorted[6 * t + k] = v[k];
    mid[t] = (int)((unsigned)v[2] + (unsigned)v[3]);   // wraps for padded rows
}
