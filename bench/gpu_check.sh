#!/usr/bin/env bash
# GPU check of `curate tag-llm`, end to end in under 10 minutes, nothing fetched from a hub (see bench/gpu_check.py):
# a Qwen2.5-7B-shaped model with random weights served by `transformers serve` on one GPU, a few thousand real
# documents, documents/s, prompt and generated tokens/s, GPU memory and the ratio to the 2·N FLOP/token limit.
#   bench/gpu_check.sh [OUT]                 on a GPU machine (needs torch with CUDA and curate[serve] installed)
#   bench/gpu_check.sh --dry-run [OUT]       on CPU: tiny shape, 40 documents (checks the script, measures nothing)
# Extra options after OUT go to bench/gpu_check.py (--docs, --seconds, --shape, --peak-tflops, ...).
# CURATE_SHARED_DATA points at the real data (default ../shared/data); PYTHON picks the interpreter (default: this
# checkout's .venv/bin/python, else python3). The whole run is bounded by 570 s.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$([[ -x $ROOT/.venv/bin/python ]] && echo "$ROOT/.venv/bin/python" || echo python3)}
DRY=()
if [[ ${1:-} == --dry-run ]]; then DRY=(--dry-run); shift; fi
OUT=${1:-$(mktemp -d -t curate-gpu-check.XXXXXX)}
[[ $# -gt 0 ]] && shift
if [[ ${#DRY[@]} -eq 0 ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "no nvidia-smi: not a GPU machine (use --dry-run)" >&2; exit 2; }
fi
"$PYTHON" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "| transformers", transformers.__version__)'
status=0
timeout --signal=INT --kill-after=20 570 "$PYTHON" "$ROOT/bench/gpu_check.py" --out "$OUT" "${DRY[@]}" "$@" || status=$?
echo "output, shards and server logs: $OUT (server: $OUT/tags/llm_v1/_logs/server, tasks: $OUT/tags/llm_v1/_logs/logs)"
exit $status
