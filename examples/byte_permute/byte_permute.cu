// byte_permute: byte shuffles as everyday code writes them: __byte_perm with
// constant selectors (byte swap, rotate, packing the low bytes of two words),
// with a selector read from memory, and prmt's modes and sign-replicating
// selectors through inline PTX.
extern "C" __global__ void byte_permute(const unsigned *x, const unsigned *y,
                                        const unsigned *sel, unsigned *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned a = x[i], b = y[i], s = sel[i];
    unsigned r[10];
    r[0] = __byte_perm(a, 0, 0x0123);          // byte swap (endianness)
    r[1] = __byte_perm(a, a, 0x2107);          // rotate bytes by one
    r[2] = __byte_perm(a, b, 0x6240);          // pack the even bytes of a and b
    r[3] = __byte_perm(a, b, s & 0x7777);      // a selector from memory
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r[4]) : "r"(a), "r"(b), "r"(s));
    asm("prmt.b32.f4e %0, %1, %2, %3;" : "=r"(r[5]) : "r"(a), "r"(b), "r"(s));
    asm("prmt.b32.b4e %0, %1, %2, %3;" : "=r"(r[6]) : "r"(a), "r"(b), "r"(s));
    asm("prmt.b32.rc8 %0, %1, %2, %3;" : "=r"(r[7]) : "r"(a), "r"(b), "r"(s));
    asm("prmt.b32.ecl %0, %1, %2, %3;" : "=r"(r[8]) : "r"(a), "r"(b), "r"(s));
    asm("prmt.b32.ecr %0, %1, %2, %3;" : "=r"(r[9]) : "r"(a), "r"(b), "r"(s));
    unsigned rc16;
    asm("prmt.b32.rc16 %0, %1, %2, %3;" : "=r"(rc16) : "r"(a), "r"(b), "r"(s));
    for (int k = 0; k < 10; k++)
        out[11 * i + k] = r[k];
    out[11 * i + 10] = rc16;
}
