#!/usr/bin/env bash
# One GPU-host session in one go (the device time is the scarce thing): set up, report the environment,
# run the GPU tests, optional profiler captures and benchmarks, then pack every log into $OUT/session.tgz.
#
#   bash scripts/gpu_session.sh [steps...]      steps: env tests sanitizer capture t2 t1 t2full t1full t3tests t3 wheel aa
#                                               gpulog sanlog (the recorded logs: every test listed, -rA)
#                                               profiletests sanrest (the nsys/ncu and A/A tests; every sanitizer
#                                               group but fused and routing)
#                                               abi sanssm sanfused (the launch ABI echo tests; the ssm and fused
#                                               sanitizer groups); syncfused (the fused group under synccheck)
#                                               profile layer layerfull layergguf
#                                               layertests sanlayer layerprobe (the layer family's GPU tests,
#                                               its sanitizer group, a quick T1024 run; layerprobe_engine: the
#                                               same on the engine's kernels in .carry/zinc-src)
#                                               kernels routing t1q6 t2down (fused formats, routing builds)
#                                               initprobe sanlayerinit router ncu_router (initcheck probes of
#                                               cuBLAS output and the layer group stage by stage; the layer
#                                               router's pieces timed apart, and under ncu)
#                                               t4tests t4 (the T4 family's GPU tests and sanitizer group; its run)
#                                               wgprobe wgtests probe, probe_MODE (scripts/probe_fused.py MODE:
#                                               probe_t1, probe_t2, probe_quarter, probe_widths80, probe_t1wide, ...)
#                                               ab_MODE (that probe mode ABBA against $BASE_KERNELS: ab_widths,
#                                               ab_q6stride, ...); q6tests q6rtests (the fused kernel's Q6_K GPU
#                                               tests; those of repacked Q6_K), ncu_MODE (ncu of probe MODE's
#                                               launches: ncu_q6rwide, ...), power_MODE (probe MODE with --power:
#                                               each T2 GEMM sustained, board power and SM clock from NVML)
#                                               ncu_fused ab_t2 (T2's chosen tiles timed ABBA against the kernels in
#                                               $BASE_KERNELS, an older kernels/ folder carried in .carry)
#                                               ncu_wgmma ncu_t2 (the fused kernel's wgmma descriptor probe, GPU tests,
#                                               per-tile probes; ncu with stall reasons at the T1 probe shapes, at
#                                               T2's chosen tiles); ncu_t2src (one GEMM's stall samples per SASS
#                                               instruction: probe $NCU_MODE's launch $NCU_SKIP + 1, by default
#                                               t2chosen's N_e 64; report $NCU_NAME); ncu_t1q6 (the widest Q6_K
#                                               tiles at T 2048)
#                                               convtests sandequant (the round trip's conversion kernels, both
#                                               sets: GPU tests, sanitizer group)
#                                               routingtests sanrouting (the routing builds' GPU tests and sanitizer
#                                               group); sass_t2 (SASS of the fused kernel at T2's tiles and
#                                               their allrows twins, opcode counts); allrowstests (the
#                                               allrows, producer and persist tiles' twin tests); wholetests (the fused kernel's
#                                               GPU tests, every tile and twin, -rA); pdltests (the GEMM as the
#                                               routing launch's dependent, and the routing builds);
#                                               prologuetests (the GEMM's inputs: routing builds, the permute, the
#                                               dependent launch, the grouped GEMM against float64)
#                                               fusedusers (the GPU tests of the fused kernel's other users: the
#                                               layer block, T4, the baseline kernels, declared variants)
#
# Expects (carried with the working tree): .whl/*.whl (packages the host lacks: nvtx, gguf) and
# .carry/*.deb (libdw1 + libelf1, which the bundled nsys importer needs). Writes under $OUT (or ./out).
# ENGINE_SRC=DIR (an engine source tree, never committed) adds --engine-src DIR to the microbench steps.
set -u
OUT=${OUT:-$PWD/out}
LOGS=/tmp/zb-session
mkdir -p "$LOGS" "$OUT"
export PYTHONUNBUFFERED=1 ZINCBENCH_RESULTS=$LOGS/results
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if ls .carry/*.deb >/dev/null 2>&1; then
    mkdir -p /tmp/dw && for f in .carry/*.deb; do dpkg -x "$f" /tmp/dw; done
    export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# Without libdw the bundled nsys importer hangs: the profile GPU tests then run only where the debs came along.
NO_NSYS=$(ls .carry/*.deb >/dev/null 2>&1 || echo "--ignore=tests/test_profile_gpu.py")
NSYS_DIR=$(ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64 2>/dev/null | tail -n 1)
[ -n "$NSYS_DIR" ] && export PATH=$PATH:$NSYS_DIR
ZB="python3 -m zincbench"
# ncu metrics beside the sections: stall reasons per issued instruction, and the Tensor pipes' busy cycles (a regex:
# the pipe names differ by architecture; an ncu that matches none reruns without them)
STALLS="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
TENSOR="regex:sm__pipe_tensor_op_.*_cycles_active\.avg\.pct_of_peak_sustained_active"
ncu_probe() {  # ncu_probe PROBE_MODE EXTRA_SECTION...: the fused probe's launches under ncu, Tensor pipes if it can
    local mode=$1; shift
    local args=(--clock-control none --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis
                --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section InstructionStats "$@"
                -k regex:gemm_kquant_mma)
    ncu "${args[@]}" --metrics "$STALLS,$TENSOR" python3 scripts/probe_fused.py "$mode" --once \
        || ncu "${args[@]}" --metrics "$STALLS" python3 scripts/probe_fused.py "$mode" --once
}
export -f ncu_probe && export STALLS TENSOR  # run() times commands with timeout: a function runs through bash -c
ENGINE=${ENGINE_SRC:+--engine-src $ENGINE_SRC}

run() {  # run NAME TIMEOUT CMD...: log to $LOGS/NAME.log, print its tail
    local name=$1 limit=$2; shift 2
    echo "=== $name: $*"
    local t0=$(date +%s)
    timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
    local rc=$?
    echo "=== $name rc=$rc ($(( $(date +%s) - t0 )) s)"
    tail -n "${TAIL:-25}" "$LOGS/$name.log"
}

for step in "${@:-env tests}"; do
    case $step in
        env) run env 60 $ZB env ;;
        tests) run tests ${TESTS_LIMIT:-300} python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests ;;
        tests_quick) run tests_quick 200 python3 -m pytest -m gpu -q -rs -p no:cacheprovider -k "routing or fused" tests ;;
        sanitizer) run sanitizer 300 python3 -m pytest -m sanitizer -q -rs -p no:cacheprovider tests ;;
        gpulog) TAIL=40 run pytest-gpu ${TESTS_LIMIT:-330} python3 -m pytest -m "gpu and not sanitizer" -rA -p no:cacheprovider \
                --durations=15 $NO_NSYS tests ;;
        sanlog) TAIL=40 run sanitizer-all ${SAN_LIMIT:-560} python3 -m pytest -m sanitizer -rA -p no:cacheprovider --durations=25 tests ;;
        profiletests) TAIL=40 run pytest-gpu-profile 300 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=5 \
                tests/test_profile_gpu.py tests/test_aa.py ;;
        sanrest) TAIL=40 run sanitizer-rest ${SAN_LIMIT:-300} python3 -m pytest -m sanitizer -rA -p no:cacheprovider \
                -k "not fused and not routing" tests/gpu/test_sanitizer.py ;;
        abi) TAIL=15 run abi 200 python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_kernel_abi_gpu.py ;;
        sanfused) TAIL=15 run sanitizer-fused ${SAN_LIMIT:-480} python3 -m pytest -m sanitizer -rA -p no:cacheprovider -k fused \
                tests/gpu/test_sanitizer.py ;;
        syncfused) TAIL=15 run synccheck-fused 300 compute-sanitizer --tool synccheck --print-limit 100 \
                python3 -m zincbench.testing.sanitize_driver fused ;;  # the fused group under synccheck (barrier use)
        sanssm) TAIL=15 run sanitizer-ssm 300 python3 -m pytest -m sanitizer -rA -p no:cacheprovider -k ssm tests/gpu/test_sanitizer.py ;;
        capture) run capture 180 bash tests/fixtures/profile/capture.sh "$LOGS/profile" ;;
        t2) run t2 200 $ZB microbench t2 --quick --no-progress --markdown "$LOGS/t2.md" ;;
        t1) run t1 300 $ZB microbench t1 --quick --no-progress --markdown "$LOGS/t1.md" ;;
        t1sq) run t1sq 200 $ZB microbench t1 --quick --case square --no-progress --markdown "$LOGS/t1sq.md" ;;
        declared) run declared 200 python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/gpu/test_declared_gpu.py ;;
        t2full) TAIL=60 run t2full ${T2_LIMIT:-300} $ZB microbench t2 $ENGINE --no-progress --markdown "$LOGS/t2full.md" ;;
        kernels) TAIL=30 run kernels 200 python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/gpu/test_fused_mma.py \
                tests/gpu/test_kernels_baseline.py -k "test_fused_mma or routing" ;;
        routing) run routing 60 python3 scripts/probe_routing.py ;;
        t1q6) TAIL=20 run t1q6 200 $ZB microbench t1 $ENGINE --case gemma4-31b.ffn_down --no-progress --markdown "$LOGS/t1q6.md" ;;
        t2down) TAIL=30 run t2down 200 $ZB microbench t2 $ENGINE --experiment experiments/t2_moe_down.yaml --no-progress --markdown "$LOGS/t2down.md" ;;
        gpuall) TAIL=30 ZINCBENCH_RESULTS=$LOGS/gpuall run gpuall 400 bash -c "$ZB microbench t2 $ENGINE --gpu all \
                --no-progress; $ZB report $LOGS/gpuall/microbench-*.json --markdown > $LOGS/gpuall_report.md" ;;
        example) TAIL=30 run example 200 $ZB microbench t2 $ENGINE --kernels experiments/examples/grouped_matvec.yaml \
                --candidate grouped_matvec --baseline engine_matvec --variant grouped_matvec --variant engine_matvec \
                --no-progress --markdown "$LOGS/example.md" ;;
        gguf) TAIL=30 run gguf 200 bash -c "python3 -m zincbench.testing.weights_gguf /tmp/w.gguf && \
                $ZB microbench t2 --gguf /tmp/w.gguf --quick --no-progress --markdown $LOGS/t2gguf.md; \
                $ZB microbench t1 --gguf /tmp/w.gguf --layer 0 --quick --no-progress --markdown $LOGS/t1gguf.md" ;;
        wheel) TAIL=30 run wheel 300 bash -c "python3 -m venv --system-site-packages /tmp/wheel-venv && \
                /tmp/wheel-venv/bin/pip install -q --no-index --no-deps --no-build-isolation . && cd /tmp && \
                PYTHONPATH=/tmp/site /tmp/wheel-venv/bin/zincbench microbench t2 --quick --no-progress \
                --results-dir /tmp/wheel-results && ls /tmp/wheel-results" ;;
        t2warm) TAIL=8 run t2warm 200 $ZB microbench t2 --no-progress ;;
        layertests) TAIL=40 run layer-tests 300 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=10 \
                tests/gpu/test_moe_layer_gpu.py ;;
        sanlayer) TAIL=40 run sanitizer-layer 600 python3 -m pytest -m sanitizer -rA -p no:cacheprovider --durations=5 \
                -k layer tests/gpu/test_sanitizer.py ;;
        layerprobe) TAIL=80 run layerprobe 400 $ZB microbench layer $ENGINE --case T1024 --quick --no-progress \
                --markdown "$LOGS/layerprobe.md" ;;
        layerprobe_engine) TAIL=80 run layerprobe-engine 400 $ZB microbench layer --engine-src .carry/zinc-src --case T1024 \
                --quick --no-progress --markdown "$LOGS/layerprobe-engine.md" ;;
        layer) TAIL=60 run layer 600 $ZB microbench layer $ENGINE --quick --no-progress --markdown "$LOGS/layer.md" ;;
        layerfull) TAIL=80 run layerfull 600 $ZB microbench layer $ENGINE --variant engine --variant fused_block \
                --variant fused_block_cublas_down \
                --no-progress --markdown "$LOGS/layerfull.md" ;;
        layergguf) TAIL=40 run layergguf 400 bash -c "python3 -m zincbench.testing.weights_gguf /tmp/w.gguf && \
                $ZB microbench layer --gguf /tmp/w.gguf --layer 0 --case T512 --quick --no-progress --markdown $LOGS/layergguf.md" ;;
        t1full) TAIL=80 run t1full ${T1_LIMIT:-400} $ZB microbench t1 $ENGINE --no-progress --markdown "$LOGS/t1full.md" ;;
        t3tests) TAIL=30 run t3tests 300 python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/gpu/test_t3_gpu.py ;;
        t3) TAIL=90 run t3 ${T3_LIMIT:-580} $ZB microbench t3 $ENGINE --no-progress --markdown "$LOGS/t3.md" ;;
        t4tests) TAIL=40 run t4tests 400 bash -c "python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=10 \
                tests/gpu/test_t4_gpu.py; python3 -m pytest -m sanitizer -rA -p no:cacheprovider -k t4 \
                tests/gpu/test_sanitizer.py" ;;
        t4) TAIL=90 run t4 ${T4_LIMIT:-580} $ZB microbench t4 $ENGINE --no-progress --markdown "$LOGS/t4.md" ;;
        aa) TAIL=40 run aa 300 $ZB aa microbench --markdown "$LOGS/aa.md" ;;
        profile) TAIL=60 ZINCBENCH_RESULTS=$LOGS/profile-run run profile 300 bash -c "$ZB profile microbench --tool both \
                t2 --quick --case E256-M512-K2048-Ne16; python3 scripts/profile_pack.py $LOGS/profile-run \
                $LOGS/profile-t2-Ne16" ;;  # $LOGS/profile-t2-Ne16 is what results/h200/profile-t2-Ne16 commits
        gate) TAIL=40 run gate 420 $ZB gate experiments/gates.yaml --junit "$LOGS/gate.xml" --markdown "$LOGS/gate.md" ;;
        probe) TAIL=80 run probe 400 python3 scripts/probe_fused.py ;;
        wgprobe) TAIL=20 run wgprobe 120 python3 scripts/probe_wgmma.py ;;
        ab_t2) TAIL=40 run ab-t2 ${AB_LIMIT:-300} bash scripts/ab_kernels.sh "${BASE_KERNELS:-.carry/kernels-base}" t2chosen ;;
        ab_*) TAIL=40 run "ab-${step#ab_}" ${AB_LIMIT:-300} bash scripts/ab_kernels.sh "${BASE_KERNELS:-.carry/kernels-base}" \
                "${step#ab_}" ;;  # ab_MODE: probe_fused.py MODE, ABBA against $BASE_KERNELS
        probe_*) TAIL=60 run "probe-${step#probe_}" 300 python3 scripts/probe_fused.py "${step#probe_}" ;;  # probe_MODE
        power_*) TAIL=60 run "power-${step#power_}" 300 python3 scripts/probe_fused.py "${step#power_}" --power ;;
        q6tests) TAIL=30 run pytest-fused-mma-q6k 300 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=5 \
                tests/gpu/test_fused_mma.py -k q6_k ;;
        q6rtests) TAIL=30 run pytest-fused-mma-q6k-r 300 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=5 \
                tests/gpu/test_fused_mma.py -k "q6_k_r or repacked" ;;
        ncu_t2) TAIL=60 run ncu_t2 300 bash -c "ncu_probe t2chosen" ;;
        ncu_t2src) mode=${NCU_MODE:-t2chosen} skip=${NCU_SKIP:-3} rep=$LOGS/${NCU_NAME:-ncu-t2-ne64}
                TAIL=20 run "$(basename "$rep")" 300 bash -c "ncu --clock-control none --section SourceCounters \
                --section WarpStateStats -k regex:gemm_kquant_mma --launch-skip $skip --launch-count 1 -f -o $rep \
                python3 scripts/probe_fused.py $mode --once && ncu --import $rep.ncu-rep --page source \
                --csv --print-source sass > $rep-source.csv; gzip -f $rep-source.csv; \
                ls -la $rep*" ;;  # probe MODE's launch SKIP + 1 (default: t2chosen's 4th, N_e 64): stalls per SASS line
        ncu_t1q6) TAIL=60 run ncu-t1q6 300 bash -c "ncu_probe t1q6wide --section SourceCounters" ;;
        convtests) TAIL=15 run pytest-gpu-conversions 200 python3 -m pytest -m gpu -rA -p no:cacheprovider \
                tests/gpu/test_kernels_baseline.py -k "dequant or f32_to_f16" ;;
        sandequant) TAIL=15 run sanitizer-dequant 200 python3 -m pytest -m sanitizer -rA -p no:cacheprovider -k dequant \
                tests/gpu/test_sanitizer.py ;;
        routingtests) TAIL=30 run routing-tests 200 python3 -m pytest -m gpu -rA -p no:cacheprovider \
                tests/gpu/test_kernels_baseline.py -k "routing or one_launch or gather" ;;
        sanrouting) TAIL=15 run sanitizer-routing 200 python3 -m pytest -m sanitizer -rA -p no:cacheprovider -k routing \
                tests/gpu/test_sanitizer.py ;;
        ncu_wgmma) TAIL=60 run ncu_wgmma 300 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
                --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
                --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
                -k regex:gemm_kquant_mma python3 scripts/probe_fused.py t1 --once ;;
        wgtests) TAIL=40 run wgtests 300 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=10 \
                tests/gpu/test_fused_mma.py ;;
        fusedusers) TAIL=40 run pytest-gpu-fused-users ${TESTS_LIMIT:-300} python3 -m pytest -m gpu -rA -p no:cacheprovider \
                --durations=10 tests/gpu/test_moe_layer_gpu.py tests/gpu/test_t4_gpu.py tests/gpu/test_kernels_baseline.py \
                tests/gpu/test_declared_gpu.py ;;
        ncu_fused) run ncu_fused 300 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
                --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
                --section InstructionStats -k regex:gemm_kquant_mma python3 -m zincbench.testing.sanitize_driver fused --shapes gate ;;
        initprobe) TAIL=60 run initprobe 120 compute-sanitizer --tool initcheck --print-limit 200 --show-backtrace no \
                python3 scripts/probe_initcheck.py ;;
        sanlayerinit) TAIL=60 run sanlayerinit ${SAN_LIMIT:-300} compute-sanitizer --tool initcheck --print-limit 400 \
                --show-backtrace no python3 -m zincbench.testing.sanitize_driver layer ;;
        router) TAIL=20 run router 200 python3 scripts/probe_router.py ;;
        ncu_router) TAIL=80 run ncu_router 200 ncu --clock-control none --section SpeedOfLight --section LaunchStats \
                --section Occupancy python3 scripts/probe_router.py --once ;;
        sass_t2) TAIL=20 run sass_t2 120 bash -c 'nvcc -std=c++17 -arch=sm_90a -cubin -I kernels -o /tmp/t2.cubin \
                scripts/sass_t2.cu && cuobjdump -sass /tmp/t2.cubin > '"$LOGS"'/t2.sass \
                && python3 scripts/sass_opcodes.py '"$LOGS"'/t2.sass' ;;
        allrowstests) TAIL=30 run pytest-allrows 200 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=5 \
                tests/gpu/test_fused_mma.py -k "schedule_flags or persist" ;;
        wholetests) TAIL=30 run pytest-whole 300 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=5 \
                tests/gpu/test_fused_mma.py ;;
        pdltests) TAIL=30 run pytest-pdl 300 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=5 \
                tests/gpu/test_fused_mma.py tests/gpu/test_kernels_baseline.py -k "dependent or routing or one_launch" ;;
        prologuetests) TAIL=30 run pytest-prologue 300 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=5 \
                tests/gpu/test_fused_mma.py tests/gpu/test_kernels_baseline.py \
                -k "dependent or routing or one_launch or replicated or permute or activation or grouped_matches" ;;
        ncu_*) TAIL=60 run "ncu-${step#ncu_}" 300 bash -c "ncu_probe ${step#ncu_}" ;;  # ncu_MODE: probe_fused.py MODE
        sass) run sass 120 bash -c 'nvcc -std=c++17 -arch=sm_90 -cubin -DZINCBENCH_COMPILE_CHECK -o /tmp/f.cubin \
                kernels/kquant_fused_mma.cu && cuobjdump -sass /tmp/f.cubin > '"$LOGS"'/fused.sass && grep -c "" '"$LOGS"'/fused.sass' ;;
        *) echo "unknown step $step" ;;
    esac
    tar czf "$OUT/session.tgz" -C "$LOGS" . 2>/dev/null  # after every step: a killed session keeps its logs
done
