"""What a priming build kept and measured: its counts (PrimingResult) and, read back from the written files with
DuckDB, per split behavior prevalence, answer accuracy, lengths, failures and prose diversity."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from curate.behaviors import BEHAVIOR_NAMES


@dataclass
class PrimingResult:
    output: Path
    rows: dict[str, int]
    attempted: int
    rejected: Counter = field(default_factory=Counter)
    stats: dict = field(default_factory=dict)

    @property
    def acceptance_rate(self) -> float:
        # Traces that passed every check; with the LLM writer some of them are surplus to a full split.
        return (self.attempted - sum(self.rejected.values())) / self.attempted if self.attempted else 0.0


def dataset_stats(output: Path, result: PrimingResult) -> dict:
    """Measured on the written files with DuckDB: per split, behavior prevalence, accuracy and lengths."""
    files = sorted(str(p) for p in (output / "data").glob("*.parquet"))
    stats: dict = {
        "attempted": result.attempted,
        "kept": sum(result.rows.values()),
        "acceptance_rate": result.acceptance_rate,
        "rejected": dict(result.rejected),
        "splits": {},
    }
    if not files:
        return stats
    prevalence = ", ".join(f"avg(({b} > 0)::INT) AS {b}" for b in BEHAVIOR_NAMES)
    with duckdb.connect() as connection:
        rows = connection.sql(
            f"SELECT extra_info.split, count(*), avg(answer_correct::INT), avg(think_chars), median(think_chars), "
            f"quantile_cont(think_chars, 0.9), max(think_chars), avg(think_tokens), max(think_tokens), {prevalence} "
            "FROM read_parquet($files) GROUP BY 1 ORDER BY 1",
            params={"files": files},
        ).fetchall()
        overlap = connection.sql(
            "SELECT count(*) FROM (SELECT id FROM read_parquet($files) WHERE extra_info.split = 'train' "
            "INTERSECT SELECT id FROM read_parquet($files) WHERE extra_info.split = 'test')",
            params={"files": files},
        ).fetchall()[0][0]
        failures = connection.sql(
            "SELECT coalesce(failure, CASE WHEN answer_correct THEN 'none (correct)' ELSE 'unknown' END), count(*) "
            "FROM read_parquet($files) GROUP BY 1 ORDER BY 2 DESC", params={"files": files}).fetchall()
        thinks = connection.sql("SELECT coalesce(voice, writer), completion FROM read_parquet($files)",
                                params={"files": files}).fetchall()
    for split, count, accuracy, mean_c, median_c, p90_c, max_c, mean_t, max_t, *prev in rows:
        stats["splits"][split] = {
            "rows": count, "answer_accuracy": accuracy,
            "think_chars": {"mean": mean_c, "median": median_c, "p90": p90_c, "max": max_c},
            "think_tokens": {"mean": mean_t, "max": max_t},
            "prevalence": dict(zip(BEHAVIOR_NAMES, prev)),
        }
    stats["problems_in_both_splits"] = overlap
    stats["failures"] = dict(failures)
    by_voice: dict[str, list[str]] = {}
    for voice, completion in thinks:
        by_voice.setdefault(voice, []).append(completion)
    stats["distinct_4gram_rate"] = {voice: distinct_ngram_rate(texts) for voice, texts in sorted(by_voice.items())}
    stats["distinct_4gram_rate"]["all"] = distinct_ngram_rate([c for _, c in thinks])
    return stats


def distinct_ngram_rate(texts, n: int = 4) -> float | None:
    """Distinct word n-grams over all n-grams in the texts (numbers masked, so that only the wording counts)."""
    grams = []
    for text in texts:
        words = re.sub(r"\d+", "N", text).split()
        grams += [tuple(words[k:k + n]) for k in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None
