#!/usr/bin/env bash
# LLM tagging throughput on a GPU machine with vLLM (pip install 'curate[gpu]').
#   bench/gpu_llm.sh MODEL N [INPUT] [extra `curate tag-llm` options...]
#   bench/gpu_llm.sh Qwen/Qwen2.5-7B-Instruct 2000 'owm/*.parquet' --tp 1 --structured
# Prints documents/s, requests/s, prompt and generated tokens/s and the parse-failure rate
# (the closing summary of `curate tag-llm`). Output goes to a fresh temp directory each run.
set -euo pipefail
MODEL=${1:?model}
N=${2:?number of documents}
INPUT=${3:-}
shift $(( $# < 3 ? $# : 3 ))
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python -m curate.cli tag-llm --model "$MODEL" --backend vllm --limit "$N" --output "$OUT" \
  ${INPUT:+--input "$INPUT"} "$@"
