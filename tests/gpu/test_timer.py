"""The measurement core on a real GPU: cold timing of a streaming kernel reads the measured copy
bandwidth, hot timing of an L2-resident buffer reads faster, and the records say how it stopped."""

from __future__ import annotations

import numpy as np
import pytest

from zincbench.judge import summarize
from zincbench.measure.stopping.count import FixedCountRule
from zincbench.measure.timer import GpuTimer, TimerConfig

pytestmark = pytest.mark.gpu


def _scale_kernel(cupy, x, y, sm_count):
    from zincbench.gpu.runtime import get_kernel

    kernel = get_kernel("timing.cu", "zb_scale_f4")
    n = x.size // 4
    return lambda: kernel((sm_count * 8,), (256,), (x, y, np.float32(1.5), np.uint64(n)))


def test_scale_kernel_is_correct(cupy, rng):
    from zincbench.gpu.device import current_device

    host = rng.standard_normal(4 * 1001, dtype=np.float32)
    x, y = cupy.asarray(host), cupy.full(host.size, cupy.nan, dtype=cupy.float32)
    _scale_kernel(cupy, x, y, current_device().sm_count)()
    assert np.array_equal(y.get(), np.float32(1.5) * host)


def test_cold_streaming_matches_copy_bandwidth_and_hot_l2_is_faster(cupy, rng):
    from zincbench.measure.ceilings import measure_ceilings

    cold = GpuTimer(TimerConfig(mode="cold"))
    hot = GpuTimer(TimerConfig(mode="hot"))
    copy_gbps = measure_ceilings(cold).ceilings.copy_gbps
    sms = cold.device.sm_count

    big = 128 * 2**20  # floats: 512 MiB in, 512 MiB out
    x = cupy.random.standard_normal(big, dtype=cupy.float32)
    y = cupy.empty_like(x)
    m = cold.measure(_scale_kernel(cupy, x, y, sms), name="scale-512MiB")
    gbps = 2 * x.nbytes / (summarize(m.gpu_us).median * 1e3)
    assert abs(gbps / copy_gbps - 1) < 0.2, f"cold streaming {gbps:.0f} GB/s vs copy {copy_gbps:.0f} GB/s"
    assert m.stop_reason and m.mode == "cold" and len(m.gpu_us) == len(m.cpu_launch_us)

    small = cold.device.l2_bytes // 4 // 4  # floats: a quarter of L2 in, a quarter out
    xs = cupy.random.standard_normal(small, dtype=cupy.float32)
    ys = cupy.empty_like(xs)
    run = _scale_kernel(cupy, xs, ys, sms)
    rule = FixedCountRule(200)
    cold_us = summarize(cold.measure(run, rule=rule).gpu_us).median
    hot_us = summarize(hot.measure(run, rule=rule).gpu_us).median
    assert hot_us < 0.9 * cold_us, f"L2-resident hot {hot_us:.2f} µs vs cold {cold_us:.2f} µs"


def test_launch_hiding_falls_back_when_the_function_synchronizes(cupy):
    timer = GpuTimer(TimerConfig(mode="hot", warmup=1))
    x = cupy.ones(1024, dtype=cupy.float32)

    def syncing():
        x.sum().get()  # a host round-trip inside the timed region

    m = timer.measure(syncing, rule=FixedCountRule(3))
    assert not m.launch_hiding and any("launch hiding timed out" in n for n in m.notes)
