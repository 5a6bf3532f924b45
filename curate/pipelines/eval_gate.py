"""The eval-gate job: what a cascade's cheap gate costs and saves, measured against LLM labels.

A seeded sample of the documents the LLM labelled (route 'llm' where the shards say which were routed) is found in
the corpus and run through the gate; `classifiers.cascade.gate_report` counts, per behavior, the LLM positives the
gate let through, and the documents it ruled out (the requests a cascade would not send).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.cascade import GateReport, gate_report
from curate.errors import CurateError
from curate.pipelines.jobs import EvalGateJob
from curate.pipelines.query import attribute_shards
from curate.pipelines.readers import make_reader

GATE_BATCH = 64  # documents per gate call


class EvalGateError(CurateError, FileNotFoundError):
    pass


def sample_labels(llm_tags: Path, sample: int, seed: int) -> dict[str, dict]:
    """id -> the LLM's count per behavior, for a seeded reservoir sample of `sample` rows the LLM labelled."""
    files = attribute_shards(llm_tags)
    if not files:
        raise EvalGateError(f"no LLM attribute shards under {llm_tags}; run `curate tag-llm` first")
    shards = "read_parquet($f, union_by_name=true)"
    with duckdb.connect() as connection:
        columns = {r[0] for r in connection.sql(f"DESCRIBE SELECT * FROM {shards}", params={"f": files}).fetchall()}
        route_filter = "WHERE route = 'llm'" if "route" in columns else ""
        rows = connection.sql(
            f"SELECT id, {', '.join(BEHAVIOR_NAMES)} FROM {shards} {route_filter} "
            f"USING SAMPLE reservoir({int(sample)} ROWS) REPEATABLE ({int(seed)})",
            params={"f": files},
        ).fetchall()
    return {r[0]: dict(zip(BEHAVIOR_NAMES, r[1:], strict=True)) for r in rows}


def evaluate_gate(job: EvalGateJob) -> tuple[GateReport, int]:
    """Runs the eval-gate job: the gate's report on the sampled documents, and how many sampled ids the corpus
    lacks (a corpus other than the one the labels were made from shows here)."""
    labels = sample_labels(job.labels, job.sample, job.seed)
    classifier = get_classifier(job.gate)
    pairs, batch = [], []

    def classify_batch() -> None:
        gate_labels = classifier.classify([text for text, _ in batch])
        pairs.extend(zip(gate_labels, [llm_row for _, llm_row in batch], strict=True))
        batch.clear()

    for document in make_reader(job.corpus).run(None):
        llm_row = labels.pop(document.id, None)  # popped: a repeated id is compared once, at its first occurrence
        if llm_row is None:
            continue
        batch.append((document.text, llm_row))
        if len(batch) == GATE_BATCH:
            classify_batch()
        if not labels:
            break
    if batch:
        classify_batch()
    return gate_report(pairs), len(labels)
