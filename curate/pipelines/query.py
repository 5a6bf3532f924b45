"""DuckDB queries over attribute shards: selection for builds, statistics for `curate stats` and cards.

Every dataset is a cheap, re-runnable query over the shards; changing a threshold never re-runs a model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb

from curate.behaviors import BEHAVIOR_NAMES, Behavior

HISTOGRAM_BUCKETS = ("0", "1", "2", "3-5", "6-10", ">10")


def parquet_files(root: str | Path) -> list[str]:
    """Finished parquet shards under root; skips partial files and bookkeeping folders ('.x', '_x')."""
    root = Path(root)
    if root.is_file():
        return [str(root)]
    files = []
    for path in sorted(root.rglob("*.parquet")):
        relative = path.relative_to(root).parts[:-1]
        if not any(part.startswith((".", "_")) or part == "rejects" for part in relative):
            files.append(str(path))
    return files


def _sql_list(files: list[str]) -> str:
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"


def _open_shards(connection: duckdb.DuckDBPyConnection, files: list[str]) -> list[str]:
    """Creates the view `shards` over the files; returns its columns."""
    if not files:
        raise FileNotFoundError("no parquet shards found")
    connection.execute(f"CREATE VIEW shards AS SELECT * FROM read_parquet({_sql_list(files)}, union_by_name=true)")
    return [row[0] for row in connection.sql("DESCRIBE shards").fetchall()]


@dataclass
class Selection:
    behaviors: list[Behavior] | None  # None: documents with none of the four behaviors
    min_count: int = 1
    exclude: list[Behavior] = field(default_factory=list)
    limit: int | None = None
    seed: int = 0

    def __post_init__(self):
        if self.min_count < 1:
            raise ValueError("--min-count must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise ValueError("--limit must be positive")
        if self.behaviors and set(self.behaviors) & set(self.exclude):
            both = ", ".join(b.value for b in set(self.behaviors) & set(self.exclude))
            raise ValueError(f"{both} is both required and excluded")

    def describe(self) -> dict:
        data = asdict(self)
        data["behaviors"] = "none" if self.behaviors is None else [b.value for b in self.behaviors]
        data["exclude"] = [b.value for b in self.exclude]
        return data

    def where(self) -> str:
        # Unknown is not zero: a document whose counts are null (error) is never selected as "none".
        conditions = ["error IS NULL"]
        if self.behaviors is None:
            conditions += [f"{b} = 0" for b in BEHAVIOR_NAMES]
        else:
            conditions += [f"{b.value} >= {int(self.min_count)}" for b in self.behaviors]
        conditions += [f"{b.value} = 0" for b in self.exclude]
        return " AND ".join(conditions)


def select_ids(tags_dir: str | Path, selection: Selection, output_path: str | Path) -> int:
    """Writes the selected attribute rows to output_path (parquet); returns how many were selected.

    Order is a seeded hash of the id, so --limit takes a reproducible random sample, not the first rows."""
    files = parquet_files(tags_dir)
    output_path = Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = output_path.with_suffix(".partial")
    if not files:
        raise FileNotFoundError(f"no attribute shards under {tags_dir}")
    limit = f"LIMIT {int(selection.limit)}" if selection.limit else ""
    with duckdb.connect() as connection:
        connection.execute(
            f"""COPY (SELECT * FROM read_parquet($files, union_by_name=true) WHERE {selection.where()}
                ORDER BY md5(id || ':' || '{int(selection.seed)}') {limit}) TO '{tmp}' (FORMAT parquet)""",
            {"files": files},
        )
        count = connection.sql(f"SELECT count(*) FROM read_parquet('{tmp}')").fetchall()[0][0]
    tmp.replace(output_path)
    return count


@dataclass
class BehaviorStats:
    classifier: str
    documents: int
    characters: int
    errors: int
    prevalence: dict[str, float]  # share of documents with a known count where the behavior is present
    present: dict[str, int]
    null_rate: dict[str, float]
    mean_count_when_present: dict[str, float]
    cooccurrence: dict[str, dict[str, int]]  # documents where both are present
    histogram: dict[str, dict[str, int]]  # behavior -> bucket -> documents
    any_behavior: int
    no_behavior: int


def behavior_stats(root: str | Path) -> list[BehaviorStats]:
    files = parquet_files(root)
    with duckdb.connect() as connection:
        has_error = "error" in _open_shards(connection, files)
        results = []
        classifiers = [r[0] for r in connection.sql("SELECT DISTINCT classifier FROM shards ORDER BY 1").fetchall()]
        for classifier in classifiers:
            where = f"classifier = '{classifier}'"
            known = " AND ".join(f"{b} IS NOT NULL" for b in BEHAVIOR_NAMES)
            row = connection.sql(
                f"""SELECT count(*), coalesce(sum(n_chars), 0), {"count(error)" if has_error else "0"},
                    {", ".join(f"count({b}), count(*) FILTER ({b} > 0), avg({b}) FILTER ({b} > 0)" for b in BEHAVIOR_NAMES)},
                    count(*) FILTER ({known} AND ({" OR ".join(f"{b} > 0" for b in BEHAVIOR_NAMES)})),
                    count(*) FILTER ({known} AND {" AND ".join(f"{b} = 0" for b in BEHAVIOR_NAMES)})
                FROM shards WHERE {where}"""
            ).fetchall()[0]
            documents, characters, errors = row[0], row[1], row[2]
            prevalence, present, null_rate, mean_count = {}, {}, {}, {}
            for i, behavior in enumerate(BEHAVIOR_NAMES):
                known_count, present_count, mean = row[3 + 3 * i : 6 + 3 * i]
                present[behavior] = present_count
                prevalence[behavior] = present_count / known_count if known_count else 0.0
                null_rate[behavior] = 1 - known_count / documents if documents else 0.0
                mean_count[behavior] = float(mean or 0.0)
            pairs = connection.sql(
                f"SELECT {', '.join(f'count(*) FILTER ({a} > 0 AND {b} > 0)' for a in BEHAVIOR_NAMES for b in BEHAVIOR_NAMES)} "
                f"FROM shards WHERE {where}"
            ).fetchall()[0]
            n = len(BEHAVIOR_NAMES)
            cooccurrence = {a: {b: pairs[i * n + j] for j, b in enumerate(BEHAVIOR_NAMES)} for i, a in enumerate(BEHAVIOR_NAMES)}
            histogram = {}
            for behavior in BEHAVIOR_NAMES:
                buckets = connection.sql(
                    f"""SELECT CASE WHEN {behavior} = 0 THEN '0' WHEN {behavior} = 1 THEN '1' WHEN {behavior} = 2 THEN '2'
                               WHEN {behavior} <= 5 THEN '3-5' WHEN {behavior} <= 10 THEN '6-10' ELSE '>10' END, count(*)
                        FROM shards WHERE {where} AND {behavior} IS NOT NULL GROUP BY 1"""
                ).fetchall()
                counts = dict(buckets)
                histogram[behavior] = {bucket: counts.get(bucket, 0) for bucket in HISTOGRAM_BUCKETS}
            results.append(
                BehaviorStats(
                    classifier=classifier, documents=documents, characters=int(characters), errors=errors,
                    prevalence=prevalence, present=present, null_rate=null_rate,
                    mean_count_when_present=mean_count, cooccurrence=cooccurrence, histogram=histogram,
                    any_behavior=row[-2], no_behavior=row[-1],
                )
            )
        return results


def count_rejects(rejects_dir: str | Path) -> dict[str, int]:
    """Rejected records per reason (the part before the first colon)."""
    files = sorted(str(p) for p in Path(rejects_dir).glob("rejects_*.jsonl")) if Path(rejects_dir).is_dir() else []
    files = [f for f in files if Path(f).stat().st_size > 0]
    if not files:
        return {}
    with duckdb.connect() as connection:
        rows = connection.sql(
            "SELECT split_part(reason, ':', 1) AS kind, count(*) FROM read_json($files, format='newline_delimited', "
            "columns={'reason': 'VARCHAR'}) GROUP BY 1 ORDER BY 2 DESC",
            params={"files": files},
        ).fetchall()
    return dict(rows)
