"""What every cpt module shares: the two sets' names, the error a bad request raises, the token budget and the
tokenizer that counts it."""

from __future__ import annotations

import re

from curate import hf_tokenizers
from curate.errors import CurateError

VARIANTS = ("enriched", "minimized")


class CPTError(CurateError, ValueError):
    """The request cannot be met (bad options, too few candidates); the message says what to change."""


def parse_token_count(value: str | int) -> int:
    """'8.3M', '500k', '1.2B', '2e6' or an integer."""
    if isinstance(value, int):
        count = value
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmb]?)\s*", str(value), re.IGNORECASE)
        if not match:
            raise CPTError(f"--tokens {value!r}: give a number such as 8.3M, 500k or 2000000")
        count = round(float(match.group(1)) * {"": 1, "k": 10**3, "m": 10**6, "b": 10**9}[match.group(2).lower()])
    if count < 1:
        raise CPTError("--tokens must be positive")
    return count


def load_tokenizer(name_or_path: str):
    """The tokenizer at a path or of a hub name; a CPTError that names it when it cannot be loaded."""
    try:
        return hf_tokenizers.load_tokenizer(name_or_path)
    except Exception as error:
        raise CPTError(f"cannot load the tokenizer {name_or_path!r}: {type(error).__name__}: {error}") from error
