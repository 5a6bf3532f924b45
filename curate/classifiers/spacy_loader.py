"""Imports spaCy without torch, so that the cue classifiers start in well under a second of imports.

spaCy imports thinc, and thinc imports torch (and cupy, tensorflow, mxnet) when they are installed: several seconds
(and most of `curate tag`'s start-up) that a blank English tokenizer and its matchers never use. While spaCy loads,
torch is hidden (`sys.modules["torch"] = None` makes `import torch` fail, which thinc takes as "no torch"); it is
importable again right after, for the classifiers that need it (distilled, llm). A process that has already
imported torch keeps it, and thinc sees it as usual.
"""

from __future__ import annotations

import sys


def _import_spacy_without_torch() -> None:
    hide = "torch" not in sys.modules
    if hide:
        sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        import spacy
        import spacy.matcher
        import spacy.pipeline  # noqa: F401  (the Sentencizer, which loads more of thinc)
    finally:
        if hide and sys.modules.get("torch", False) is None:
            del sys.modules["torch"]


_import_spacy_without_torch()
