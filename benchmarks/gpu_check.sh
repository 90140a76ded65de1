#!/usr/bin/env bash
# The GPU check of docs/scaling.md: LLaDA-8B- and Dream-7B-shaped models (random weights, bfloat16), DiffScore
# items/s, sampler tokens/s, peak memory, and the data-parallel path on every visible GPU. At most ~8 minutes.
#   bash benchmarks/gpu_check.sh              # on a machine with a GPU (builds .venv first if it is missing)
#   bash benchmarks/gpu_check.sh --smoke      # tiny shapes on the CPU (checks the script)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || make venv
exec timeout 480 "$PY" benchmarks/gpu_check.py "$@"
