"""`user_ngram_v1`: n-gram heads read from a folder of the user's (`curate adapt` writes them there), used as
`--classifier user_ngram:DIR`. The model format is cues_ngram's; a threshold moved by `curate adapt` is folded into
the head's intercept, so the model decides at 0.5 like the shipped ones and its scores are on the same footing."""

from __future__ import annotations

from pathlib import Path

from curate.classifiers.base import get_classifier, register
from curate.classifiers.cues_ngram import MODELS, CueNgramClassifier, NgramModel, NgramModelError


class UserNgramClassifier(CueNgramClassifier):
    def __init__(self, directory: Path, batch_size: int = 64):
        directory = Path(directory)
        if not (directory / "model.json").exists():
            raise NgramModelError(f"{directory} holds no model.json: give the folder `curate adapt` wrote, e.g. "
                                  "--classifier user_ngram:models/adapted_ngram_v1")
        self.name = "user_ngram_v1"
        self.heads = NgramModel.load(directory)
        self.cues = get_classifier(self.heads.cues, batch_size=batch_size)
        self.prompt_version = f"weights-{self.heads.digest}"  # which of the user's versions tagged a row


def is_shipped(directory: Path) -> bool:
    """Whether `directory` is (or is inside) the shipped models' folder, which `curate adapt` never writes."""
    return Path(directory).resolve().is_relative_to(MODELS)


@register("user_ngram_v1")
def make_user_ngram_classifier(model_dir: str | None = None, batch_size: int = 64) -> UserNgramClassifier:
    if model_dir is None:
        raise NgramModelError("user_ngram needs its model folder: --classifier user_ngram:models/adapted_ngram_v1")
    return UserNgramClassifier(Path(model_dir), batch_size)
