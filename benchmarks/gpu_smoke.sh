#!/usr/bin/env bash
# GPU smoke benchmark: the precompute benchmark and a small precompute on one
# CUDA device, printing the same figures as the CPU runs in benchmarks/README.md. ≤ 5 minutes.
# Without a CUDA device it prints why and exits 0 having run nothing (CI skips it this way).
#
#   bash benchmarks/gpu_smoke.sh            # PY=/path/to/python to choose the interpreter
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu_smoke: SKIPPED: nvidia-smi not found (no NVIDIA driver); nothing was run."
    exit 0
fi
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_smoke: SKIPPED: torch.cuda.is_available() is false (CPU-only torch or no usable GPU); nothing was run."
    exit 0
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
start=$(date +%s)
echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"

echo "== 1. precompute_speed.py on cuda, fp32: runner vs naive loop (112 generations, smollm2)"
timeout 170 "$PY" benchmarks/precompute_speed.py --device cuda
echo "== 1b. the same runner in bf16 (runner only)"
timeout 60 "$PY" benchmarks/precompute_speed.py --device cuda --dtype bfloat16 --runner-only

echo "== 2. small precompute on cuda: demo.toml, smollm2, 1 prompt per dataset"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s.%N)
timeout 60 "$PY" -m precompute --config precompute/configs/demo.toml --store "$tmp/smoke.duckdb" \
    --model smollm2-135m-instruct --n-prompts 1 --no-progress
t1=$(date +%s.%N)
"$PY" - "$tmp/smoke.duckdb" "$t0" "$t1" <<'PYEOF'
import sys
from sago_engine.store import open_store
path, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
with open_store(path, read_only=True) as st:
    runs = st.runs()
    n = st.counts()["responses"]
    sgs = st.prompt_scores().groupby("axis")["s"].mean()
print(f"precompute: {t1 - t0:.1f} s wall (process start, plan, load, generate, score, publish) for {n} responses; "
      f"device {runs['device'].iloc[0]}, dtype {runs['dtype'].iloc[0]}")
print("SGS per axis: " + ", ".join(f"{a} {v:.4f}" for a, v in sgs.items()))
PYEOF
echo "gpu_smoke: done in $(( $(date +%s) - start )) s"
