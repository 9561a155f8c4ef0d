#!/usr/bin/env bash
# Wheels of what the runner imports but the device machine's image lacks (pydantic and its
# own dependencies; torch, httpx, numpy, tqdm and nvidia-ml-py are there), for its Python
# 3.12 on x86-64, at the versions this checkout's .venv runs. The device cannot reach a
# package index: run this here first, then carry .whl (git-ignored) with the device call,
# where bench/gpu_check.sh installs them:
#   run(command="bash bench/gpu_check.sh 2>&1 | tee $OUT/gpu_check.log", carry=[".whl"])
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
packages=()
for name in pydantic pydantic-core annotated-types typing-inspection typing-extensions; do
  version=$("$PYTHON" -c "from importlib.metadata import version; print(version('$name'))")
  packages+=("$name==$version")
done
rm -rf .whl && mkdir .whl
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl "${packages[@]}"
ls .whl
