"""The review sample: drawn so that a reader's labels say the most about the classifier, with the design recorded so
that `curate calibrate` can weigh the labels back to the corpus.

Documents are split into strata by what the classifier said: the rarest behavior it predicted (behaviors ranked by
how few documents it predicted them in; "none" when it predicted none) and, for classifiers that score, whether any
behavior's score lies near the threshold (|score - 0.5| < NEAR_THRESHOLD) or all are far from it. Every stratum gets
an equal share of the sample (capped at its size, the rest shared among the others), so a behavior predicted in 1 %
of the corpus is read as often as one predicted in 40 %, and uncertain documents as often as confident ones. Each
labeled document then stands for stratum_size / labeled_in_stratum documents of the corpus (calibrate.py).

The sample is written once to OUTPUT/sample.jsonl (shuffled across strata, so a reader who stops early still holds a
spread of strata) with the text, spans and scores the page shows, and the design to OUTPUT/design.json; reopening the
folder serves the same sample.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

from curate.behaviors import BEHAVIOR_NAMES
from curate.errors import CurateError
from curate.files import atomic_open
from curate.pipelines.query import attribute_shards, open_shards
from curate.pipelines.readers import InputSpec, is_reject, make_reader

SAMPLE_FILE = "sample.jsonl"
DESIGN_FILE = "design.json"
LABELS_FILE = "labels.jsonl"
NEAR_THRESHOLD = 0.2  # a score within this of 0.5 is "near": the documents whose label a small change would flip
NONE_PREDICTED = "none"


class ReviewError(CurateError, ValueError):
    pass


@dataclass(frozen=True)
class TaggedRow:
    id: str
    predicted: dict[str, int]
    scores: dict[str, float] | None


def read_tags(tags: Path) -> tuple[str, list[TaggedRow]]:
    """The classifier's name and one row per document with known counts (rows with an error have no label to check).
    Evidence is left out here: it is read for the sampled documents only."""
    files = attribute_shards(tags)
    if not files:
        raise ReviewError(f"no attribute shards under {tags}: give one classifier's tags folder, e.g. "
                          "tags/cues_ngram_v1 (run `curate tag` first)")
    with duckdb.connect() as connection:
        columns = open_shards(connection, files)
        missing = [b for b in BEHAVIOR_NAMES if b not in columns]
        if missing:
            raise ReviewError(f"{tags} holds no column {', '.join(missing)}: give a folder of curate attribute shards")
        has_scores = "scores" in columns
        error = "error IS NULL" if "error" in columns else "TRUE"
        score_columns = [f"scores.{b} AS score_{b}" for b in BEHAVIOR_NAMES] if has_scores else []
        table = connection.sql(
            f"SELECT {', '.join(['id', 'classifier', *BEHAVIOR_NAMES, *score_columns])}"
            f" FROM shards WHERE {error} AND {' AND '.join(f'{b} IS NOT NULL' for b in BEHAVIOR_NAMES)} ORDER BY id"
        ).fetchall()
    classifiers = sorted({row[1] for row in table if row[1]})
    if len(classifiers) > 1:
        raise ReviewError(f"{tags} holds the tags of {', '.join(classifiers)}: give one classifier's folder")
    rows = []
    for row in table:
        counts = row[2 : 2 + len(BEHAVIOR_NAMES)]
        scores = row[2 + len(BEHAVIOR_NAMES):]
        known_scores = {b: float(s) for b, s in zip(BEHAVIOR_NAMES, scores) if s is not None}
        rows.append(TaggedRow(row[0], {b: int(c > 0) for b, c in zip(BEHAVIOR_NAMES, counts)},
                              known_scores if len(known_scores) == len(BEHAVIOR_NAMES) else None))
    return (classifiers[0] if classifiers else tags.name), rows


def strata_of(rows: list[TaggedRow]) -> list[str]:
    """Each row's stratum: its rarest predicted behavior (or 'none'), and '/near' or '/far' where it has scores."""
    predicted_in = Counter(b for row in rows for b in BEHAVIOR_NAMES if row.predicted[b])
    rarest_first = sorted(BEHAVIOR_NAMES, key=lambda b: (predicted_in[b], BEHAVIOR_NAMES.index(b)))
    strata = []
    for row in rows:
        label = next((b for b in rarest_first if row.predicted[b]), NONE_PREDICTED)
        if row.scores is not None:
            near = any(abs(score - 0.5) < NEAR_THRESHOLD for score in row.scores.values())
            label += "/near" if near else "/far"
        strata.append(label)
    return strata


def allocate(sizes: dict[str, int], sample: int) -> dict[str, int]:
    """An equal share of `sample` per stratum, capped at the stratum's size; what a small stratum cannot take is
    shared among the others until the sample is placed or the corpus is used up."""
    allocation = {stratum: 0 for stratum in sizes}
    left = min(sample, sum(sizes.values()))
    while left > 0:
        open_strata = sorted(s for s in sizes if allocation[s] < sizes[s])
        share, extra = divmod(left, len(open_strata))
        for position, stratum in enumerate(open_strata):
            take = min(share + (position < extra), sizes[stratum] - allocation[stratum])
            allocation[stratum] += take
            left -= take
    return allocation


def draw(rows: list[TaggedRow], sample: int, seed: int) -> tuple[list[tuple[TaggedRow, str]], dict]:
    """The sampled rows with their strata, shuffled, and the design: per stratum its size and sample."""
    strata = strata_of(rows)
    members: dict[str, list[int]] = {}
    for index, stratum in enumerate(strata):
        members.setdefault(stratum, []).append(index)
    allocation = allocate({s: len(m) for s, m in members.items()}, sample)
    rng = np.random.default_rng(seed)
    chosen = [i for stratum in sorted(members)
              for i in rng.choice(members[stratum], allocation[stratum], replace=False)]
    chosen = [chosen[i] for i in rng.permutation(len(chosen))]
    design = {"strata": {s: {"size": len(members[s]), "sample": allocation[s]} for s in sorted(members)},
              "near_threshold": NEAR_THRESHOLD}
    return [(rows[i], strata[i]) for i in chosen], design


def evidence_of(tags: Path, ids: list[str]) -> dict[str, list[dict]]:
    """The evidence spans of the given documents, read from the attribute rows' `evidence` field whatever the
    classifier (cue spans today, span classifiers' spans the same way)."""
    with duckdb.connect() as connection:
        columns = open_shards(connection, attribute_shards(tags))
        if "evidence" not in columns:
            return {doc_id: [] for doc_id in ids}
        connection.execute("CREATE TEMP TABLE wanted (id VARCHAR)")
        connection.executemany("INSERT INTO wanted VALUES (?)", [(doc_id,) for doc_id in ids])
        rows = connection.sql("SELECT id, evidence FROM shards JOIN wanted USING (id)").fetchall()
    return {doc_id: [dict(span) for span in (evidence or [])] for doc_id, evidence in rows}


def texts_of(spec: InputSpec, ids: set[str]) -> dict[str, str]:
    """The sampled documents' texts, read from the corpus the tags were made from (stops once all are found)."""
    found: dict[str, str] = {}
    for document in make_reader(spec).run(None):
        if not is_reject(document) and document.id in ids and document.id not in found:
            found[document.id] = document.text
            if len(found) == len(ids):
                break
    return found


def create_sample(tags: Path, spec: InputSpec, output: Path, sample: int, seed: int) -> dict:
    """Draws the sample and writes OUTPUT/sample.jsonl and OUTPUT/design.json; returns the design. A folder that
    already holds a sample keeps it (reopening resumes); one drawn from other tags or with other settings is refused."""
    settings = {"tags": str(tags.resolve()), "corpus": spec.fingerprint(), "sample": sample, "seed": seed}
    design_path = output / DESIGN_FILE
    if design_path.exists():
        design = json.loads(design_path.read_text(encoding="utf-8"))
        if design["settings"] != settings:
            raise ReviewError(f"{output} holds a review drawn with other settings ({design['settings']}); give another "
                              "--output, or the same --tags, --input, --sample and --seed to resume it")
        return design
    classifier, rows = read_tags(tags)
    if not rows:
        raise ReviewError(f"{tags} holds no document with known labels to review")
    drawn, design = draw(rows, sample, seed)
    ids = [row.id for row, _ in drawn]
    texts = texts_of(spec, set(ids))
    missing = [doc_id for doc_id in ids if doc_id not in texts]
    if missing:
        raise ReviewError(f"{len(missing)} sampled ids (e.g. {missing[0]!r}) are not in the corpus {spec.path}: give "
                          "the --input (and --id-key) the tags were made from")
    evidence = evidence_of(tags, ids)
    output.mkdir(parents=True, exist_ok=True)
    with atomic_open(output / SAMPLE_FILE) as sink:
        for row, stratum in drawn:
            sink.write(json.dumps({"id": row.id, "stratum": stratum, "stratum_size": design["strata"][stratum]["size"],
                                   "predicted": row.predicted, "scores": row.scores, "spans": evidence.get(row.id, []),
                                   "text": texts[row.id]}, ensure_ascii=False) + "\n")
    design |= {"classifier": classifier, "documents": len(rows), "settings": settings}
    with atomic_open(design_path) as sink:
        sink.write(json.dumps(design, indent=1) + "\n")
    return design


def read_sample(output: Path) -> list[dict]:
    path = output / SAMPLE_FILE
    if not path.exists():
        raise ReviewError(f"{path} does not exist: run `curate review --tags DIR -o {output}` to draw the sample")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
