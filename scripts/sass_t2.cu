// The fused kernel at the tiles T2 chose (2026-12-04, 2864e71) and their all-rows twins (ALL_ROWS), for SASS reading:
// `gpu_session.sh sass_t2` compiles this for sm_90a, dumps it with cuobjdump and counts each kernel's instructions by
// opcode (scripts/sass_opcodes.py).
#include "kquant_fused_mma.cu"

#define ZB_T2(...)                                                                                                   \
    template __global__ void gemm_kquant_mma<__VA_ARGS__>(                                                           \
        const unsigned char*, const uint4*, float*, int, int, int, unsigned long long, const unsigned*,              \
        const unsigned*, const unsigned*, int, int, const unsigned char*, const unsigned*, int, float*, unsigned*, int, \
        int, int, const ZbTensorMap*, int);
#define ZB_T2_TWINS(...) ZB_T2(__VA_ARGS__) ZB_T2(__VA_ARGS__, true)
ZB_T2_TWINS(ZbQ4KWhole, 1, 2, 8, 1, 4, 1, false, true, ZB_EPI_STORE, true, false, false, ZB_TMA_W)  // N_e 8: 128x16
ZB_T2_TWINS(ZbQ4KWhole, 1, 4, 8, 1, 3, 1, false, true, ZB_EPI_STORE, true, false, false, ZB_TMA_W)  // N_e 16: 128x32
ZB_T2_TWINS(ZbQ4KWhole, 1, 8, 16, 1, 3, 1, true, true, ZB_EPI_STORE, true, false, false, ZB_TMA_W)  // N_e 32: 256x64
ZB_T2_TWINS(ZbQ4K, 1, 12, 16, 1, 4, 1, true, true, ZB_EPI_STORE, true, false, true, ZB_TMA_W)       // N_e 64: 256x96 qtr
