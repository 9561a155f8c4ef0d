#!/usr/bin/env bash
# GPU check of the runner (issues 3, 11 and 26), sized to end within 8 minutes on one
# H200 whatever fails: every step runs under `timeout` (STEP_TIMEOUT_<name> overrides
# its limit), a failing or hung step is recorded in $OUT/steps.tsv and the next one runs,
# and the summary with its PASS/FAIL/SKIP verdicts is always printed. Steps, cheapest and
# surest first:
#   probe    the precision probe (grouped GEMM, native scaled GEMMs, why not), NVML's
#            NVLink counters read twice and the GPU state NVML gives,
#   ceiling  a bf16 GEMM ceiling measured in the same run,
#   layer    the layer alone on a decode shape (T=64, E=256, K=2: half the experts get
#            no rows) in a one-rank NCCL group: eager vs CUDA-graph time, replay vs eager,
#            staged vs standard, layer-only peak memory, then one torch.profiler pass over
#            one replay per pipeline: kernel names and times, CUTLASS grouped GEMMs, NCCL
#            kernels, device-to-host copies inside the step, kernel time by kind against
#            the layer's time (bench/gpu_layer_check.py),
#   matrix   standard and staged on a large single-GPU shape with ep1_group = true (EP 1
#            still runs all_to_all_single; every precision, fp8 where this runner has it,
#            training in CUDA graphs, one case with an injected OOM in its numerical
#            check, reported with ooms 1),
#   decode   the decode shape's matrix,
#   mega     mega last, one case: the only torch.compile of the check,
#   summary  per case: layer time, % of the measured ceilings, phases, numerics, graphs,
#            memory, gpuState; then the verdicts (bench/gpu_check_summary.py).
# Without a GPU (or with --dry-run) it runs the same steps on tiny shapes on the CPU over
# gloo (the profiler then sees CPU operators), in under 2 minutes.
# Needs torch, pydantic and httpx importable by $PYTHON (default: .venv/bin/python, else
# python3); on the device machine run bench/gpu_wheels.sh here first and carry .whl.
# No `set -e`: a step's failure is its verdict, not the end of the check.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUT=${OUT:-bench/out/gpu_check}
rm -rf "$OUT" && mkdir -p "$OUT"
STEPS="$OUT/steps.tsv"
: > "$STEPS"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The device machine's image lacks pydantic: bench/gpu_wheels.sh fetched it here, and the
# device call carries it as .whl (it cannot reach a package index).
if ! "$PYTHON" -c 'import pydantic' 2>/dev/null && compgen -G ".whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/moescope-site .whl/*.whl
  export PYTHONPATH="$PWD:/tmp/moescope-site${PYTHONPATH#"$PWD"}"
fi

dry=0
if [ "${1:-}" = "--dry-run" ] || ! timeout 60 "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  dry=1
fi
if [ $dry = 1 ]; then export CUDA_VISIBLE_DEVICES=""; fi

# step NAME SECONDS COMMAND...: COMMAND under `timeout` (SIGTERM at the limit, SIGKILL
# 10 s later), its output on stdout and in $OUT/NAME.log; "NAME rc seconds limit" in
# $STEPS. Limits sum to under 7 minutes with the kill margins: 8 with the summary.
step() {
  local name=$1 limit=$2 var="STEP_TIMEOUT_$1" start=$SECONDS rc
  shift 2
  limit=${!var:-$limit}
  echo "== $name (limit ${limit}s, t=${SECONDS}s)"
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  rc=${PIPESTATUS[0]}
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - start))" "$limit" >> "$STEPS"
  [ "$rc" = 0 ] || echo "!! step $name failed (exit $rc); going on"
}

step probe 40 "$PYTHON" - <<'PY'
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

n=8192; [ $dry = 1 ] && n=256
step ceiling 25 "$PYTHON" bench/gemm_ceiling.py $n
cp "$OUT/ceiling.log" "$OUT/ceiling.json"

if [ $dry = 1 ]; then
  decode=(16 32 32 1 32)  # T D E K F: 16 rows over 32 experts
  warm='warmup_ms = 0'
else
  decode=(64 2048 256 2 768)  # 128 rows over 256 experts: at least half get none
  warm='warmup_ms = 200'
fi
step layer 80 "$PYTHON" bench/gpu_layer_check.py "${decode[@]}" "$OUT/profile.json"

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
fp8=()  # fp8 cases where this checkout's runner has the precision (asked at run time)
if timeout 60 "$PYTHON" -c 'import sys; from runner.spec import PRECISIONS; sys.exit("fp8" not in PRECISIONS)' 2>/dev/null; then
  fp8=(fp8)
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
  case_table inference mxfp8 staged gpu_check
  case_table inference nvfp4 staged gpu_check
  for p in "${fp8[@]}"; do case_table inference "$p" standard gpu_check; done
  case_table inference mxfp8 standard oom_check
  case_table training bf16 standard gpu_check
  case_table training mxfp8 staged gpu_check
} > "$OUT/matrix.toml"
{
  printf 'seed = 0\nep1_group = true\n[shape]\n%s\n[timing]\n%s\n%s\n' "$shape" "$timing" "$warm"
  case_table inference bf16 mega gpu_check
} > "$OUT/mega.toml"
F=${decode[4]}
{
  printf 'seed = 0\nep1_group = true\n[shape]\nT = %s\nD = %s\nE = %s\nK = %s\n[timing]\n%s\n%s\n' \
    "${decode[0]}" "${decode[1]}" "${decode[2]}" "${decode[3]}" "$timing" "$warm"
  case_table inference bf16 standard decode
  case_table inference bf16 staged decode
  case_table inference mxfp8 staged decode
  case_table inference nvfp4 standard decode
  for p in "${fp8[@]}"; do case_table inference "$p" staged decode; done
} > "$OUT/decode.toml"
# The oom_check case runs out of memory (injected) in its numerical check: the runner
# must report it with ooms 1 and go on to the next case. The injection is test-only:
# tests/site/sitecustomize.py arms it (tests/injection.py) when on PYTHONPATH.
# --out is rewritten after every case: a step cut short by its timeout (SIGTERM: the run
# writes its runFailureNote) still leaves the cases it finished for the summary.
run=("$PYTHON" -m cli run --nproc 1 --spool "$OUT/spool")
PYTHONPATH="$PWD/tests/site:$PWD/tests:$PYTHONPATH" \
MOESCOPE_INJECT_OOM="rank=0,case=oom_check,phase=numerics" \
step matrix 110 "${run[@]}" --matrix "$OUT/matrix.toml" --out "$OUT/report.json"
step decode 50 "${run[@]}" --matrix "$OUT/decode.toml" --out "$OUT/decode.json"
step mega 90 "${run[@]}" --matrix "$OUT/mega.toml" --out "$OUT/mega.json"

echo "== summary (t=${SECONDS}s)"
timeout -k 5 20 "$PYTHON" bench/gpu_check_summary.py "$OUT"
echo "== done (t=${SECONDS}s)"
