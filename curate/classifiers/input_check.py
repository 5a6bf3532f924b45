"""A model trained on another classifier's output checks, when it loads, that this classifier still labels as it did.

`cues_ngram_v1`, `spans_v1` and the heads `curate adapt` writes read `cues_v11`'s counts and hits as features. A change
to `cues_v11`'s rules would move every one of those inputs without any retraining, and the heads would go on scoring
texts they were never fitted to. So a model folder carries `inputs.json`: the input classifier's name, a few check
texts (copied from the bundled sample corpus, so that editing that corpus cannot move them) and the digest of that
classifier's labels of them when the model was written. Loading the model labels the check texts again (a few
milliseconds) and refuses a model whose input classifier now answers otherwise. A model folder written before this
file existed has none and loads unchecked.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from curate.classifiers.base import get_classifier
from curate.errors import CurateError

INPUT_CHECK = "inputs.json"
SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "sample_data" / "corpus"
CHECK_TEXTS = 24  # every few texts of the sample corpus: enough that each behavior's cues fire on several


class InputClassifierChanged(CurateError, ValueError):
    pass


def labels_digest(classifier_name: str, texts: list[str]) -> str:
    """The digest of `classifier_name`'s counts and evidence spans of `texts` (what a model reads of them)."""
    return _digest(classifier_name, tuple(texts))


# Cached by content: every shipped folder (spans_v2 and its document head, cues_ngram_v1, ...) holds the same check
# texts, so a process that loads several models labels them once.
@functools.cache
def _digest(classifier_name: str, texts: tuple[str, ...]) -> str:
    labels = get_classifier(classifier_name).classify(list(texts))
    what = [[sorted((b, c) for b, c in label.counts.items()),
             [[e.behavior, e.start, e.end] for e in label.evidence], label.error] for label in labels]
    return hashlib.sha256(json.dumps(what, ensure_ascii=False).encode("utf-8")).hexdigest()


def check_texts() -> list[str]:
    """Evenly spaced texts of the bundled sample corpus."""
    texts = [json.loads(line)["text"] for path in sorted(SAMPLE_CORPUS.glob("*.jsonl"))
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    step = max(1, len(texts) // CHECK_TEXTS)
    return texts[::step][:CHECK_TEXTS]


def write_input_check(directory: Path, classifier_name: str) -> None:
    """Record in `directory` which classifier the model reads and how it labels the check texts now."""
    texts = check_texts()
    record = {"classifier": classifier_name, "digest": labels_digest(classifier_name, texts), "texts": texts}
    (directory / INPUT_CHECK).write_text(json.dumps(record, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")


def verify_input_check(directory: Path, classifier_name: str) -> None:
    """Refuse the model in `directory` if `classifier_name` no longer labels its check texts as when it was written."""
    _verify(directory.resolve(), classifier_name)


@functools.cache
def _verify(directory: Path, classifier_name: str) -> None:
    path = directory / INPUT_CHECK
    if not path.exists():
        return
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        recorded, texts, digest = record["classifier"], record["texts"], record["digest"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InputClassifierChanged(f"cannot read {path}: {error}; reinstall curate or rewrite the model") from error
    if recorded != classifier_name:
        raise InputClassifierChanged(f"{directory} reads {classifier_name}'s output but {path} was written for "
                                     f"{recorded}; rewrite the model")
    if labels_digest(classifier_name, texts) != digest:
        raise InputClassifierChanged(
            f"{directory.name} was trained on {classifier_name}'s labels, and {classifier_name} now labels the check "
            f"texts in {path} differently: its rules changed after release. Restore {classifier_name} (its golden "
            f"labels pin it) or retrain the model on a new version")
