// The fused kernel at the tiles T2 chose (2026-12-02) for SASS reading: `gpu_session.sh sass_t2` compiles this for
// sm_90a and dumps it with cuobjdump (instruction counts per half superblock, register moves around the wgmmas).
#include "kquant_fused_mma.cu"

#define ZB_T2(...)                                                                                                   \
    template __global__ void gemm_kquant_mma<__VA_ARGS__>(                                                           \
        const unsigned char*, const uint4*, float*, int, int, int, unsigned long long, const unsigned*,              \
        const unsigned*, const unsigned*, int, int, const unsigned char*, const unsigned*, int, float*, unsigned*, int, \
        int, int);
ZB_T2(ZbQ4K, 1, 2, 4, 1, 3, 1, false, true, ZB_EPI_STORE)        // N_e 8: mma.sync 64x16
ZB_T2(ZbQ4K, 1, 8, 8, 1, 4, 2, true, true, ZB_EPI_STORE, true)   // N_e 32, 64: wgmma 128x64, trimmed
