// pack_bytes: pack four bytes into a word with shifts, unpack through uchar4 (bytes reversed), and byte-swap a word with __byte_perm and with shifts.
extern "C" __global__ void pack_bytes(const unsigned char *in, unsigned *packed, uchar4 *rev, unsigned *swapped, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const unsigned char *b = in + 4 * i;
    unsigned w = (unsigned)b[0] | ((unsigned)b[1] << 8) | ((unsigned)b[2] << 16) | ((unsigned)b[3] << 24);
    packed[i] = w;
    uchar4 u = reinterpret_cast<const uchar4 *>(in)[i];
    rev[i] = make_uchar4(u.w, u.z, u.y, (unsigned char)(u.x + u.w));
    unsigned s1 = __byte_perm(w, 0, 0x0123);
    unsigned s2 = (w >> 24) | ((w >> 8) & 0xff00u) | ((w << 8) & 0xff0000u) | (w << 24);
    swapped[2 * i] = s1;
    swapped[2 * i + 1] = s1 ^ s2;        // 0 when both agree
}
