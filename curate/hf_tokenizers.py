"""Hugging Face tokenizers loaded from disk first, the hub only for what is not there.

`AutoTokenizer.from_pretrained("org/name")` asks the hub whether a cached tokenizer changed before using it. With no
network it retries each file five times, about 50 s, before it falls back to the cache, and a cluster node without
internet pays that on every run and task (`cpt --rewrite`, priming's token counts, the LLM classifier's truncation).
The local copy, a directory or the cache, is tried first; the hub only when there is none.
"""

from __future__ import annotations


def load_tokenizer(name_or_path: str):
    """The tokenizer of a model directory or hub name, read from disk when it is there (offline in a moment),
    else from the hub. Raises what transformers raises when neither has it."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
    except OSError:
        return AutoTokenizer.from_pretrained(name_or_path)
