#!/usr/bin/env bash
# GPU check of the runner (issues 3 and 11), sized for under 7 minutes on one H200:
#   1. the precision probe (grouped GEMM, native mxfp8/nvfp4 scaled GEMMs, why not),
#      NVML's NVLink counters read twice and the GPU state NVML gives,
#   2. a bf16 GEMM ceiling measured in the same run,
#   3. the layer alone on a decode shape (T=64, E=256, K=2: half the experts get no
#      rows) in a one-rank NCCL group: eager vs CUDA-graph time, graph replay vs eager,
#      staged and mega vs standard, layer-only peak memory (bench/gpu_layer_check.py),
#   4. two single-GPU matrices with ep1_group = true, so EP 1 still runs
#      all_to_all_single, NCCL inside the CUDA graphs, mega's functional collectives and
#      the staged streams: a large shape (every pipeline and precision, training in CUDA
#      graphs, one case with an injected OOM in its numerical check, reported with ooms 1)
#      and the decode shape,
# then per case: layer time and window spread, % of the measured ceiling (the bf16 GEMM
# of step 2, and the run's own grouped-GEMM ceiling at the case's shape from
# meta.measuredCeilings), phaseMS (each phase its own CUDA graph), the phases' sum against
# the layer time, remote-bytes GB/s, numerics vs bound, graphAccepted, allocated peak,
# gpuState.
# Without a GPU (or with --dry-run) it runs the same steps on tiny shapes on the CPU.
# Needs torch, pydantic and httpx importable by $PYTHON (default: .venv/bin/python, else
# python3); on the device machine run bench/gpu_wheels.sh here first and carry .whl.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUT=${OUT:-bench/out/gpu_check}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The device machine's image lacks pydantic: bench/gpu_wheels.sh fetched it here, and the
# device call carries it as .whl (it cannot reach a package index).
if ! "$PYTHON" -c 'import pydantic' 2>/dev/null && compgen -G ".whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/moescope-site .whl/*.whl
  export PYTHONPATH="$PWD:/tmp/moescope-site${PYTHONPATH#"$PWD"}"
fi

dry=0
if [ "${1:-}" = "--dry-run" ] || ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  dry=1
fi

echo "== probe (t=${SECONDS}s)"
"$PYTHON" - <<'PY'
import json
import time

import torch

from runner.native import scaled_gemm
from runner.platform import detect, host_info, nvlink_counters

plat = detect(0)
print(json.dumps({"device": plat.gpu_name, "groupedMM": plat.grouped_mm,
                  "groupedMMReason": plat.grouped_mm_reason,
                  "nativeScaledGEMM": plat.native_scaled,
                  "host": host_info(plat, 1)}, indent=1))
if plat.cuda:
    print("capability", torch.cuda.get_device_capability(plat.device))
    # Why a native scaled GEMM is unavailable (the probe itself only says whether).
    x = torch.randn(128, 256, device=plat.device, dtype=torch.bfloat16)
    w = torch.randn(256, 128, device=plat.device, dtype=torch.bfloat16)
    for precision in ("mxfp8", "nvfp4"):
        try:
            scaled_gemm(x, w, precision)
            torch.cuda.synchronize()
            print(f"native {precision}: ran")
        except Exception as exc:  # noqa: BLE001
            print(f"native {precision}: {type(exc).__name__}: {str(exc)[:300]}")
    # NVML's NVLink data counters (all links, bytes): running totals if both reads are
    # non-None and the second is not below the first.
    first = nvlink_counters(plat.device)
    time.sleep(1)
    print("nvlink counters 1 s apart (TX, RX bytes, fields):", first,
          nvlink_counters(plat.device))
    from runner.gpustate import Sampler

    with Sampler(plat.device) as sampler:
        time.sleep(0.2)
    print("gpu state over 0.2 s idle:", sampler.state())
PY

echo "== bf16 GEMM ceiling (t=${SECONDS}s)"
if [ $dry = 1 ]; then "$PYTHON" bench/gemm_ceiling.py 256 | tee "$OUT/ceiling.json"
else "$PYTHON" bench/gemm_ceiling.py 8192 | tee "$OUT/ceiling.json"; fi

if [ $dry = 1 ]; then
  decode=(16 32 32 1 32)  # T D E K F: 16 rows over 32 experts
  warm='warmup_ms = 0'
else
  decode=(64 2048 256 2 768)  # 128 rows over 256 experts: at least half get none
  warm='warmup_ms = 200'
fi
echo "== layer alone, decode shape, one-rank group (t=${SECONDS}s)"
"$PYTHON" bench/gpu_layer_check.py "${decode[@]}" | tee "$OUT/layer.txt"

echo "== single-GPU matrices (EP 1, one-rank group) (t=${SECONDS}s)"
if [ $dry = 1 ]; then
  shape='T = 64
D = 128
E = 4
K = 2'
  timing='windows = 2
iterations = 2
warmup = 1'
  F=128
else
  # 16k tokens x top-4 over 16 experts of 7168 x 2048: ~5.8 TFLOP a forward pass.
  shape='T = 16384
D = 7168
E = 16
K = 4'
  timing='windows = 5
iterations = 10
warmup = 3'
  F=2048
fi
# One [[case]] table: mode, precision, pipeline, category (EP 1, imbalance 1, width F).
case_table() {
  printf '[[case]]\nmode = "%s"\nep = 1\nprecision = "%s"\npipeline = "%s"\nF = %s\nimbalance = 1\ncategory = "%s"\n' \
    "$1" "$2" "$3" "$F" "$4"
}
{
  printf 'seed = 0\nep1_group = true\n[shape]\n%s\n[timing]\n%s\n%s\n' "$shape" "$timing" "$warm"
  case_table inference bf16 standard gpu_check
  case_table inference bf16 staged gpu_check
  case_table inference bf16 mega gpu_check
  case_table inference mxfp8 staged gpu_check
  case_table inference nvfp4 staged gpu_check
  case_table inference mxfp8 standard oom_check
  case_table training bf16 standard gpu_check
  case_table training mxfp8 staged gpu_check
  case_table training bf16 mega gpu_check
} > "$OUT/matrix.toml"
F=${decode[4]}
{
  printf 'seed = 0\nep1_group = true\n[shape]\nT = %s\nD = %s\nE = %s\nK = %s\n[timing]\n%s\n%s\n' \
    "${decode[0]}" "${decode[1]}" "${decode[2]}" "${decode[3]}" "$timing" "$warm"
  case_table inference bf16 standard decode
  case_table inference bf16 staged decode
  case_table inference bf16 mega decode
  case_table inference mxfp8 staged decode
  case_table inference nvfp4 standard decode
} > "$OUT/decode.toml"
# The oom_check case runs out of memory (injected) in its numerical check: the runner
# must report it with ooms 1 and go on to the next case. The injection is test-only:
# tests/site/sitecustomize.py arms it (tests/injection.py) when on PYTHONPATH.
PYTHONPATH="$PWD/tests/site:$PWD/tests:$PYTHONPATH" \
MOESCOPE_INJECT_OOM="rank=0,case=oom_check,phase=numerics" \
"$PYTHON" -m cli run --matrix "$OUT/matrix.toml" --nproc 1 --out "$OUT/report.json" \
  --spool "$OUT/spool"
echo "== decode matrix (t=${SECONDS}s)"
"$PYTHON" -m cli run --matrix "$OUT/decode.toml" --nproc 1 --out "$OUT/decode.json" \
  --spool "$OUT/spool"

echo "== summary (t=${SECONDS}s)"
"$PYTHON" bench/gpu_check_summary.py "$OUT/ceiling.json" "$OUT/report.json" "$OUT/decode.json"
