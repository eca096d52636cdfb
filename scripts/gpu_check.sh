#!/usr/bin/env bash
# The GPU checks of kernels/ as one short prepared run (an H200: a few minutes), for a
# session that is lent a GPU machine: the Triton kernels compiled on CUDA against their
# references (tests/unit/test_kernels.py), the CUDA-event stage timers
# (tests/unit/test_stage_clock.py) and end to end (tests/integration/test_kernel_engine.py,
# skipped where gymnasium and ale-py are missing: carry their wheels as the device README
# says, e.g. ale-py, gymnasium, farama-notifications), then scripts/bench_kernels.py on the GPU.
# Needs only torch, triton, numpy and pytest there (no install: PYTHONPATH is a copy of the
# checkout laid out as installed; -P keeps the bare checkout off sys.path).
# Run from the repository root: OUT=DIR bash scripts/gpu_check.sh [bench_kernels.py options]
# (DIR defaults to gpu-check; a dry run here: bash scripts/gpu_check.sh --nets small --populations 8).
set -uo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
# setup.cfg maps neuroevo.kernels to kernels/: lay the package out as an install would.
pkg=$(mktemp -d)
cp -r neuroevo "$pkg/" && cp -r kernels "$pkg/neuroevo/kernels"
export PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} 2>&1 | tee "$out/gpu.txt"
timeout 240 python3 -P -m pytest -q -ra -p no:cacheprovider tests/unit/test_kernels.py \
  tests/unit/test_stage_clock.py tests/integration/test_kernel_engine.py 2>&1 \
  | tee "$out/tests.log"
tests=${PIPESTATUS[0]}
timeout 300 python3 -P scripts/bench_kernels.py --json "$out/kernels.json" "$@" 2>&1 \
  | tee "$out/bench.log"
bench=${PIPESTATUS[0]}
# MuJoCo Warp (issue 35), where mujoco-warp and warp-lang are importable (carry their wheels,
# with mujoco 4.0.1, gymnasium and farama-notifications): the CPU tests of the warp path,
# then --sim warp against --sim native in one bench: ES population 4,096, MLP 256-256,
# Humanoid-v5 on the GPU (targets: >= 200k env steps/s, >= 0.5 of sim_only, >= 10x native;
# warp.peak_memory_bytes < 8 GB).
warp=0
if python3 -P -c "import mujoco_warp" 2>/dev/null; then
  timeout 300 python3 -P -m pytest -q -ra -p no:cacheprovider -n 0 tests/integration/test_warp.py \
    -k "not run_trains" 2>&1 | tee "$out/warp-tests.log"
  warp=${PIPESTATUS[0]}
  timeout 420 python3 -P -m neuroevo bench --env Humanoid-v5 --sim warp --population 4096 \
    --device cuda --seconds 20 --rounds 1 --json "$out/warp-humanoid.json" 2>&1 \
    | tee "$out/warp-bench.log"
  warp=$((warp || PIPESTATUS[0]))
else
  echo "mujoco_warp not importable: the warp checks did not run" | tee -a "$out/gpu.txt"
fi
echo "tests exit $tests, bench exit $bench, warp exit $warp" | tee -a "$out/gpu.txt"
exit $((tests || bench || warp))
