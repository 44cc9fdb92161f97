// Timing helpers for zincbench's measurement core.
//
// zb_spin_until_released: nvbench's "blocking kernel". It holds the benchmark stream while the host
// enqueues the timed launches behind it, so the measured GPU time excludes host launch gaps. The
// host releases it through mapped (zero-copy) host memory; a timeout guards against a timed
// function that synchronizes implicitly, which would otherwise deadlock.
extern "C" __global__ void zb_spin_until_released(volatile int* flag, unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flag[0] == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {
            flag[1] = 1;  // timed out: the sample behind it is not launch-hidden
            break;
        }
    }
}

// zb_scale_f4: y = a * x over n float4s, a grid-stride streaming kernel. The measurement core's
// calibration workload: its cold-L2 time must match the copy bandwidth, its hot time on an
// L2-resident buffer must beat that.
extern "C" __global__ void zb_scale_f4(const float4* __restrict__ x, float4* __restrict__ y, float a,
                                       unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const float4 v = x[i];
        y[i] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
    }
}
