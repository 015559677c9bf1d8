// shared_u8_flags: 8-bit shared memory: a __shared__ unsigned char "seen" flag per key and a u8 copy of the keys; per-key counts by a loop over the bytes; u8 global output.
extern "C" __global__ void shared_u8_flags(const unsigned char *in, unsigned char *seen_out, unsigned char *counts, unsigned char *distinct)
{
    __shared__ unsigned char seen[16];
    __shared__ unsigned char keys[16];
    unsigned t = threadIdx.x;
    seen[t] = 0;
    unsigned char k = in[t] & 15;
    keys[t] = k;
    __syncthreads();
    seen[k] = 1;                          // benign race: every writer stores 1
    __syncthreads();
    unsigned char c = 0;
    for (int j = 0; j < 16; j++)
        c += keys[j] == t;
    counts[t] = c;
    seen_out[t] = seen[t] ? (unsigned char)(0x80 | t) : 0;
    if (t == 0) {
        unsigned char d = 0;
        for (int j = 0; j < 16; j++)
            d += seen[j];
        *distinct = d;
    }
}
