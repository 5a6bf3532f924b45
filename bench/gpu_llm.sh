#!/usr/bin/env bash
# LLM tagging throughput on a GPU machine with vLLM (pip install 'curate[gpu]').
#   bench/gpu_llm.sh MODEL N [INPUT] [extra `curate tag-llm` options...]
#   bench/gpu_llm.sh Qwen/Qwen2.5-7B-Instruct 2000 'owm/*.parquet' --tp 1 --structured
#   bench/gpu_llm.sh Qwen/Qwen2.5-7B-Instruct 500 --structured          (no INPUT: the bundled sample corpus)
# INPUT is the third argument only when it does not start with '-'; everything after goes to `curate tag-llm`.
# Prints documents/s, requests/s, prompt and generated tokens/s and the parse-failure rate (the closing summary of
# `curate tag-llm`). Output goes to a fresh temp directory, removed after a successful run and kept (with the
# server and task logs) after a failed one. PYTHON picks the interpreter (default: the one next to this checkout's
# .venv, else python3); the venv need not be activated.
set -euo pipefail
usage() { sed -n '2,5p' "$0" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
MODEL=$1
N=$2
shift 2
[[ $N =~ ^[0-9]+$ ]] || { echo "N must be a number of documents, got '$N'" >&2; usage; }
INPUT=""
if [[ $# -gt 0 && $1 != -* ]]; then INPUT=$1; shift; fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$([[ -x $ROOT/.venv/bin/python ]] && echo "$ROOT/.venv/bin/python" || echo python3)}
OUT=$(mktemp -d -t curate-gpu-llm.XXXXXX)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
status=0
(cd "$ROOT" && "$PYTHON" -m curate.cli tag-llm --model "$MODEL" --backend vllm --limit "$N" --output "$OUT" \
  ${INPUT:+--input "$INPUT"} "$@") || status=$?
if [[ $status -eq 0 ]]; then
  rm -rf "$OUT"
else
  echo "curate tag-llm failed (exit $status); kept $OUT: server logs in $OUT/*/_logs/server, task logs in $OUT/*/_logs/logs" >&2
fi
exit $status
