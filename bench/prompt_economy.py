"""What the llm_v1 prompt layout costs: prompt tokens per document and tokens a prefix-caching
server must prefill, for per-behavior document-first (llm_v1), per-behavior instruction-first (the
layout of the original study) and joint.

Prefill with prefix caching: every distinct prefix is computed once, so the cost of a set of
requests is the number of nodes in their token trie (the shared system prompt counts once for the
whole corpus, the document once per document when it comes first).

    python bench/prompt_economy.py                       # sample corpus, BPE trained on it
    python bench/prompt_economy.py --tokenizer Qwen/Qwen2.5-32B-Instruct --input 'owm/*.jsonl'

Without --tokenizer (no hub access needed) a 32k byte-level BPE is trained on the corpus itself,
with Qwen's ChatML template; ratios barely depend on the vocabulary.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.behaviors import BEHAVIOR_NAMES  # noqa: E402
from curate.classifiers.llm import JOINT, PromptSet, Truncator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INPUTS = [str(ROOT / "curate/sample_data/corpus/*.jsonl"), "/work/shared/data/longcot_skythought/*.jsonl"]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def read_texts(patterns: list[str], limit: int) -> list[str]:
    texts = []
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                # Sample corpus: text; SkyThought long CoT files: question + long solution.
                text = None
                if isinstance(record, dict):
                    text = record.get("text") or "\n\n".join(
                        str(record[k]) for k in ("question", "solution") if isinstance(record.get(k), str))
                if isinstance(text, str) and text.strip():
                    texts.append(text)
                if len(texts) >= limit:
                    return texts
    return texts


def trained_tokenizer(texts: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=32000, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>")
    tokenizer.chat_template = CHATML
    return tokenizer


class Trie:
    def __init__(self):
        self.root: dict = {}
        self.nodes = 0

    def add(self, tokens: list[int]) -> None:
        node = self.root
        for t in tokens:
            if t not in node:
                node[t] = {}
                self.nodes += 1
            node = node[t]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", action="append", help="jsonl glob(s) with a 'text' field")
    parser.add_argument("--tokenizer", help="hub name or local path of a model tokenizer with a chat template")
    parser.add_argument("--limit", type=int, default=2000)
    parser.add_argument("--max-doc-tokens", type=int, default=3072)
    args = parser.parse_args()

    texts = read_texts(args.input or DEFAULT_INPUTS, args.limit)
    if args.tokenizer:
        from transformers import AutoTokenizer

        tokenizer, which = AutoTokenizer.from_pretrained(args.tokenizer), args.tokenizer
    else:
        tokenizer, which = trained_tokenizer(texts), "byte-level BPE, 32k, trained on this corpus (ChatML template)"
    truncate = Truncator("unused", args.max_doc_tokens)
    truncate.__dict__["tokenizer"] = tokenizer
    prompts = PromptSet.load()

    def encode(messages):
        return tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)

    layouts = {
        "per-behavior, document first (llm_v1)": (list(BEHAVIOR_NAMES), False),
        "per-behavior, instruction first": (list(BEHAVIOR_NAMES), True),
        "joint, document first": ([JOINT], False),
    }
    doc_tokens = 0
    totals = {name: 0 for name in layouts}
    tries = {name: Trie() for name in layouts}
    for text in texts:
        document, _, n = truncate(text)
        doc_tokens += n
        for name, (keys, instruction_first) in layouts.items():
            for key in keys:
                ids = encode(prompts.messages(document, key, instruction_first=instruction_first))
                ids = ids["input_ids"] if isinstance(ids, dict) else ids
                totals[name] += len(ids)
                tries[name].add(list(ids))
    docs = len(texts)
    print(f"corpus: {docs} documents, {doc_tokens / docs:,.0f} document tokens each after truncation to {args.max_doc_tokens}")
    print(f"tokenizer: {which}; prompt version {prompts.version}")
    print(f"{'layout':42s} {'prompt tok/doc':>15s} {'prefill tok/doc':>16s} {'prefill / doc tokens':>21s}")
    for name in layouts:
        print(f"{name:42s} {totals[name] / docs:15,.0f} {tries[name].nodes / docs:16,.0f} {tries[name].nodes / doc_tokens:21.2f}")


if __name__ == "__main__":
    main()
