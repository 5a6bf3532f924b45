"""End-to-end GPU check of `curate tag-llm`, with nothing fetched from a hub (run through bench/gpu_check.sh).

1. Real documents: GSM8K train (question + solution), PRM800K and Stack Exchange math texts from CURATE_SHARED_DATA
   (default ../shared/data) and the bundled sample corpus, deduplicated, the first --docs of them.
2. A model of a real architecture with random weights, built from its config (default: the Qwen2.5-7B shape,
   7.6 B parameters, bf16), and a byte-level BPE tokenizer trained on those documents with a ChatML template.
3. `curate tag-llm --backend transformers --gpus-per-task 1` end to end (one `transformers serve` per task on its
   own GPU, datatrove's InferenceRunner, parquet shards), joint mode, bounded by --seconds.
4. Prints documents/s, prompt and generated tokens/s (whole run, and between the first and last finished chunk,
   which leaves out the server start), peak GPU memory (nvidia-smi), and the ratio of 2·N FLOP per processed token
   to the GPU's peak (--peak-tflops, default 989: H100/H200 bf16 dense).

What it cannot tell: anything about vLLM (this serves with transformers), label quality (the weights are random,
so answers are noise and most rows are parse failures), or a real tokenizer's token counts (the trained
tokenizer is smaller than Qwen's, so a document is more tokens here).

    python bench/gpu_check.py --out /tmp/gpu-check                      # on a GPU machine
    python bench/gpu_check.py --dry-run --out /tmp/gpu-check-dry        # CPU: tiny shape, 40 documents
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {
    # Qwen/Qwen2.5-7B-Instruct's config.json, less the tokenizer-specific ids.
    "qwen2.5-7b": {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
                   "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768,
                   "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False},
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 2048, "max_position_embeddings": 8192, "tie_word_embeddings": True},
}
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def real_documents(limit: int) -> list[str]:
    shared = Path(os.environ.get("CURATE_SHARED_DATA", ROOT.parent / "shared" / "data"))
    texts: list[str] = []

    def jsonl(path: Path, make) -> None:
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    text = make(json.loads(line))
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue
                if isinstance(text, str) and text.strip():
                    texts.append(text)

    jsonl(shared / "gsm8k" / "train.jsonl", lambda r: f"{r['question']}\n\n{r['answer']}")
    for path in sorted((shared / "prm800k").glob("*.jsonl")) + sorted((shared / "stackexchange_math").glob("*.jsonl")):
        jsonl(path, lambda r: r.get("text") or "\n\n".join(str(v) for v in r.values() if isinstance(v, str)))
    for path in sorted((ROOT / "curate" / "sample_data" / "corpus").glob("*.jsonl")):
        jsonl(path, lambda r: r["text"])
    unique = list(dict.fromkeys(texts))
    if len(unique) < limit:
        print(f"note: {len(unique)} distinct real documents found (set CURATE_SHARED_DATA for more); using them all",
              file=sys.stderr)
    return unique[:limit]


def build_model(directory: Path, shape: str, texts: list[str], device: str, vocab: int) -> int:
    """Config -> random weights -> safetensors; returns N, the parameters a token passes through (all but the
    input embedding, which is a lookup)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab, special_tokens=special,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    config = Qwen2Config(**SHAPES[shape], eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"), bos_token_id=None)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    torch.set_default_dtype(torch.float32)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(directory)
    n = sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()
    if config.tie_word_embeddings:  # the tied matrix is also the output projection
        n += model.get_input_embeddings().weight.numel()
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return n


class GpuMemory(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.peak_mib = None
        self.done = threading.Event()

    def run(self) -> None:
        if shutil.which("nvidia-smi") is None:
            return
        while not self.done.is_set():
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, check=False).stdout.split()
            used = [int(v) for v in out if v.isdigit()]
            if used:
                self.peak_mib = max(self.peak_mib or 0, max(used))
            self.done.wait(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shape, 40 documents: checks the script itself")
    parser.add_argument("--shape", choices=sorted(SHAPES), default=None)
    parser.add_argument("--docs", type=int, default=None)
    parser.add_argument("--seconds", type=int, default=None, help="wall-clock bound of the tagging run")
    parser.add_argument("--max-doc-tokens", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    args = parser.parse_args()
    device = "cpu" if args.dry_run else "cuda"
    shape = args.shape or ("tiny" if args.dry_run else "qwen2.5-7b")
    docs = args.docs or (40 if args.dry_run else 3000)
    seconds = args.seconds or (300 if args.dry_run else 420)
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            sys.exit("no CUDA device visible to torch; on CPU run with --dry-run")
    if shutil.which("transformers", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])) is None:
        sys.exit("`transformers serve` is missing: pip install 'curate[serve]'")
    shutil.rmtree(args.out, ignore_errors=True)
    (args.out / "corpus").mkdir(parents=True)
    started = time.perf_counter()
    texts = real_documents(docs)
    with (args.out / "corpus" / "docs.jsonl").open("w") as out:
        for i, text in enumerate(texts):
            out.write(json.dumps({"id": f"doc-{i}", "text": text}) + "\n")
    n_params = build_model(args.out / "model", shape, texts, device, vocab=SHAPES[shape]["vocab_size"] if shape == "tiny" else 32000)
    built = time.perf_counter() - started
    print(f"{len(texts)} documents; {shape} model with random weights, N = {n_params / 1e9:.2f} B, built in {built:.0f} s",
          flush=True)

    command = [sys.executable, "-m", "curate.cli", "tag-llm", "--model", str(args.out / "model"), "--backend", "transformers",
               "--device", device, "--gpus-per-task", "1", "--mode", "joint", "--max-doc-tokens", str(args.max_doc_tokens),
               "--max-answer-tokens", "16", "--concurrency", str(args.concurrency), "--records-per-chunk", "100",
               "--server-start-timeout", "300", "--input", str(args.out / "corpus"), "--output", str(args.out / "tags")]
    env = dict(os.environ)
    if device == "cuda":
        command += ["--server-arg", "dtype=bfloat16", "--server-arg", "continuous-batching"]
    else:
        env["CUDA_VISIBLE_DEVICES"] = "0"  # a made-up GPU id: exercises --gpus-per-task slicing on CPU
    memory = GpuMemory()
    memory.start()
    run_started = time.time()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, timeout=seconds, check=False)
        status = done.returncode
    except subprocess.TimeoutExpired:
        status = "stopped at --seconds (finished chunks are counted)"
    wall = time.time() - run_started
    memory.done.set()
    report(args.out / "tags" / "llm_v1", wall, run_started, n_params, args.peak_tflops, memory.peak_mib, status)


def report(out: Path, wall: float, run_started: float, n_params: int, peak_tflops: float, peak_mib, status) -> None:
    import pyarrow.parquet as pq

    files = sorted(out.glob("attributes_*.parquet"))
    rows = [r for f in files for r in pq.read_table(f, columns=["prompt_tokens", "completion_tokens", "error"]).to_pylist()]
    prompt = sum(r["prompt_tokens"] or 0 for r in rows)
    generated = sum(r["completion_tokens"] or 0 for r in rows)
    ends = sorted(f.stat().st_mtime for f in files)
    print(f"\ncurate tag-llm exit: {status}")
    print(f"documents {len(rows):,}, prompt tokens {prompt:,}, generated tokens {generated:,}, "
          f"request errors {sum(1 for r in rows if (r['error'] or '').startswith('request:')):,}")
    lines = [("whole run (server start included)", wall, len(rows), prompt, generated)]
    if len(files) >= 3:  # first chunk to last: the server is up and requests flow
        steady = [r for f in files if f.stat().st_mtime > ends[0]
                  for r in pq.read_table(f, columns=["prompt_tokens", "completion_tokens"]).to_pylist()]
        lines.append(("after the first chunk", ends[-1] - ends[0], len(steady), sum(r["prompt_tokens"] or 0 for r in steady),
                      sum(r["completion_tokens"] or 0 for r in steady)))
    for label, seconds, n_docs, n_prompt, n_generated in lines:
        seconds = max(seconds, 1e-9)
        flops = 2 * n_params * (n_prompt + n_generated) / seconds
        print(f"{label:36s} {seconds:8.1f} s  {n_docs / seconds:9.2f} documents/s  {n_prompt / seconds:11,.0f} prompt tok/s  "
              f"{n_generated / seconds:9,.0f} generated tok/s  {flops / 1e12:8.2f} TFLOP/s = "
              f"{flops / (peak_tflops * 1e12):.3f} of the {peak_tflops:.0f} TFLOP/s limit")
    print(f"peak GPU memory used: {'-' if peak_mib is None else f'{peak_mib:,} MiB'}")


if __name__ == "__main__":
    main()
