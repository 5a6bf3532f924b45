"""DuckDB queries over attribute shards: selection for builds, statistics for `curate stats` and cards.

Every dataset is a cheap, re-runnable query over the shards; changing a threshold never re-runs a model.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb

from curate.behaviors import BEHAVIOR_NAMES, Behavior
from curate.dataset_files import files_under
from curate.errors import OptionError
from curate.files import atomic_path

HISTOGRAM_BUCKETS = ("0", "1", "2", "3-5", "6-10", ">10")
# A reject line holds its raw record, which can be a whole document: above DuckDB's 16 MB default.
MAX_REJECT_BYTES = 1 << 30


def parquet_files(root: str | Path) -> list[str]:
    """Finished parquet shards under root, as DuckDB takes them (curate.dataset_files.files_under: no partial file,
    none under a bookkeeping folder '.x', '_x' or rejects/); root itself when it is a file."""
    root = Path(root)
    return [str(root)] if root.is_file() else [str(f) for f in files_under(root)]


def attribute_shards(tags: str | Path) -> list[str]:
    """The attribute shards of a tags folder: its finished parquet files, without the selection a build keeps
    beside them (selection*.parquet holds ids, not labels)."""
    return [f for f in parquet_files(tags) if not Path(f).name.startswith("selection")]


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_list(files: list[str]) -> str:
    return "[" + ", ".join(map(_sql_literal, files)) + "]"


DUPLICATE_REJECTS = "rejects_duplicate_ids.jsonl"
# The reason given to a copy of an id dropped because another task read the copy that is kept.
KEPT_ELSEWHERE = "duplicate_id: the copy from {} is kept"
_BOOKKEEPING = ("shard_file", "shard_row", "copy_number", "copy_from", "kept_from")


def open_shards(connection: duckdb.DuckDBPyConnection, files: list[str]) -> list[str]:
    """Creates the view `shards` over the files, one row per (classifier, id); `ranked`, every row with its
    `copy_number` (1: the row `shards` keeps), where it came from (`copy_from`) and where the kept copy came from
    (`kept_from`); and `extra_copies`, the rows that are other copies of the corpus record. Returns the columns of
    `shards`.

    The one rule for an id that occurs more than once: each task keeps the first copy it reads (readers.py), and
    of the copies that different tasks read, the one from the lowest source file wins - the same copy a single
    task reading the files in sorted order would have kept. A row from the same file as the kept one is that same
    record tagged twice (a rerun with another --tasks), not another copy. Shard file and row stand in for rows
    without a source (shards written before the column existed)."""
    if not files:
        raise FileNotFoundError("no parquet shards found")
    connection.execute(
        f"""CREATE VIEW all_rows AS SELECT * RENAME (filename AS shard_file, file_row_number AS shard_row)
            FROM read_parquet({_sql_list(files)}, union_by_name=true, filename=true, file_row_number=true)""")
    columns = [row[0] for row in connection.sql("DESCRIBE all_rows").fetchall() if row[0] not in _BOOKKEEPING]
    key = "classifier, id" if "classifier" in columns else "id"
    where, order = ("coalesce(source, shard_file)", "source NULLS LAST, shard_file, shard_row") if "source" in columns \
        else ("shard_file", "shard_file, shard_row")
    connection.execute(f"""CREATE VIEW ranked AS
        SELECT *, row_number() OVER copies AS copy_number, {where} AS copy_from, first_value({where}) OVER copies AS kept_from
        FROM all_rows WINDOW copies AS (PARTITION BY {key} ORDER BY {order})""")
    connection.execute(f"CREATE VIEW shards AS SELECT * EXCLUDE ({', '.join(_BOOKKEEPING)}) FROM ranked WHERE copy_number = 1")
    connection.execute("CREATE VIEW extra_copies AS SELECT * FROM ranked WHERE copy_number > 1 AND copy_from <> kept_from")
    return columns


def write_duplicate_rejects(files: list[str], path: str | Path) -> int:
    """Writes the copies of an id that the duplicate-id rule drops from the shards (read by another task from a
    later file) to `path` as rejects and returns how many; with none, writes nothing and removes an older file."""
    path = Path(path)
    with duckdb.connect() as connection:
        open_shards(connection, files)
        count = connection.sql("SELECT count(*) FROM extra_copies").fetchall()[0][0]
        if not count:
            path.unlink(missing_ok=True)
            return 0
        with atomic_path(path) as partial:
            connection.execute(f"""
                COPY (SELECT format('{KEPT_ELSEWHERE}', kept_from) AS reason, copy_from AS source, NULL::BIGINT AS position,
                             id, '' AS raw FROM extra_copies ORDER BY source, id)
                TO {_sql_literal(str(partial))} (FORMAT json)""")
    return count


def write_kept_copies(files: list[str], rejects_dir: str | Path, path: str | Path) -> int:
    """Writes (id, source of the copy kept) for every id the tagged corpus holds more than once - the copies the
    tag tasks rejected as `duplicate_id` and the ones several tasks tagged - so that a later pass over the corpus,
    with any number of tasks, drops the same copies (steps.KeepFirstCopy). Returns how many ids."""
    path = Path(path)
    rejects = _reject_files(rejects_dir)
    with duckdb.connect() as connection:
        columns = open_shards(connection, files)
        repeated = "SELECT id FROM extra_copies"
        if rejects:
            repeated += (f" UNION SELECT id FROM read_json({_sql_list(rejects)}, format='newline_delimited', "
                         f"columns={{'reason': 'VARCHAR', 'id': 'VARCHAR'}}, maximum_object_size={MAX_REJECT_BYTES}) "
                         "WHERE split_part(reason, ':', 1) = 'duplicate_id'")
        # Rows without a source (shards written before the column existed) cannot say which copy they describe.
        source, known = ("source", "source IS NOT NULL") if "source" in columns else ("NULL::VARCHAR AS source", "false")
        with atomic_path(path) as partial:
            connection.execute(f"""COPY (SELECT id, {source} FROM shards WHERE {known} AND id IN ({repeated}) ORDER BY id)
                                   TO {_sql_literal(str(partial))} (FORMAT parquet)""")
            count = connection.sql(f"SELECT count(*) FROM read_parquet({_sql_literal(str(partial))})").fetchall()[0][0]
    return count


@dataclass
class Selection:
    behaviors: list[Behavior] | None  # None: documents with none of the four behaviors
    min_count: int = 1
    exclude: list[Behavior] = field(default_factory=list)
    limit: int | None = None
    seed: int = 0

    def __post_init__(self):
        if self.min_count < 1:
            raise OptionError("--min-count must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise OptionError("--limit must be positive")
        if self.behaviors and set(self.behaviors) & set(self.exclude):
            both = ", ".join(b.value for b in set(self.behaviors) & set(self.exclude))
            raise OptionError(f"{both} is both required and excluded")

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
    if not files:
        raise FileNotFoundError(f"no attribute shards under {tags_dir}")
    limit = f"LIMIT {int(selection.limit)}" if selection.limit else ""
    with duckdb.connect() as connection, atomic_path(output_path) as partial:
        open_shards(connection, files)
        connection.execute(
            f"""COPY (SELECT * FROM shards WHERE {selection.where()}
                ORDER BY md5(id || ':' || '{int(selection.seed)}') {limit}) TO {_sql_literal(str(partial))} (FORMAT parquet)"""
        )
        count = connection.sql(f"SELECT count(*) FROM read_parquet({_sql_literal(str(partial))})").fetchall()[0][0]
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
        columns = open_shards(connection, files)
        has_error = "error" in columns
        # Settled once: every query below would otherwise rank all rows again to apply the duplicate-id rule.
        kept = ["classifier", "n_chars", *BEHAVIOR_NAMES, *(["error"] if has_error else [])]
        connection.execute(f"CREATE TEMP TABLE rows AS SELECT {', '.join(kept)} FROM shards")
        results = []
        classifiers = [r[0] for r in connection.sql("SELECT DISTINCT classifier FROM rows ORDER BY 1").fetchall()]
        for classifier in classifiers:
            where = f"classifier = '{classifier}'"
            known = " AND ".join(f"{b} IS NOT NULL" for b in BEHAVIOR_NAMES)
            row = connection.sql(
                f"""SELECT count(*), coalesce(sum(n_chars), 0), {"count(error)" if has_error else "0"},
                    {", ".join(f"count({b}), count(*) FILTER ({b} > 0), avg({b}) FILTER ({b} > 0)" for b in BEHAVIOR_NAMES)},
                    count(*) FILTER ({known} AND ({" OR ".join(f"{b} > 0" for b in BEHAVIOR_NAMES)})),
                    count(*) FILTER ({known} AND {" AND ".join(f"{b} = 0" for b in BEHAVIOR_NAMES)})
                FROM rows WHERE {where}"""
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
                f"FROM rows WHERE {where}"
            ).fetchall()[0]
            n = len(BEHAVIOR_NAMES)
            cooccurrence = {a: {b: pairs[i * n + j] for j, b in enumerate(BEHAVIOR_NAMES)} for i, a in enumerate(BEHAVIOR_NAMES)}
            histogram = {}
            for behavior in BEHAVIOR_NAMES:
                buckets = connection.sql(
                    f"""SELECT CASE WHEN {behavior} = 0 THEN '0' WHEN {behavior} = 1 THEN '1' WHEN {behavior} = 2 THEN '2'
                               WHEN {behavior} <= 5 THEN '3-5' WHEN {behavior} <= 10 THEN '6-10' ELSE '>10' END, count(*)
                        FROM rows WHERE {where} AND {behavior} IS NOT NULL GROUP BY 1"""
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


def _reject_files(rejects_dir: str | Path) -> list[str]:
    files = sorted(str(p) for p in Path(rejects_dir).glob("rejects_*.jsonl")) if Path(rejects_dir).is_dir() else []
    return [f for f in files if Path(f).stat().st_size > 0]


def count_rejects(rejects_dir: str | Path) -> dict[str, int]:
    """Rejected records per reason (the part before the first colon)."""
    files = _reject_files(rejects_dir)
    if not files:
        return {}
    with duckdb.connect() as connection:
        rows = connection.sql(
            "SELECT split_part(reason, ':', 1) AS kind, count(*) FROM read_json($files, format='newline_delimited', "
            f"columns={{'reason': 'VARCHAR'}}, maximum_object_size={MAX_REJECT_BYTES}) GROUP BY 1 ORDER BY 2 DESC",
            params={"files": files},
        ).fetchall()
    return dict(rows)


def first_reject_reason(rejects_dir: str | Path, kind: str) -> str:
    """The full reason of the first reject of a kind (`missing_text_field: no field 'txt' (fields: ...)`), which
    says more than its kind alone: the fields the records have, the byte that is not UTF-8."""
    for path in _reject_files(rejects_dir):
        with open(path, "rb") as f:
            for line in f:
                reason = json.loads(line).get("reason") or ""
                if reason.split(":")[0] == kind:
                    return reason
    return kind


def count_kept_elsewhere(rejects_dir: str | Path) -> int:
    """Copies of an id rejected because another task read the copy that is kept (KEPT_ELSEWHERE)."""
    files = _reject_files(rejects_dir)
    if not files:
        return 0
    prefix = KEPT_ELSEWHERE.split("{}")[0]
    with duckdb.connect() as connection:
        return connection.sql(
            "SELECT count(*) FROM read_json($files, format='newline_delimited', columns={'reason': 'VARCHAR'}, "
            f"maximum_object_size={MAX_REJECT_BYTES}) WHERE starts_with(reason, $prefix)",
            params={"files": files, "prefix": prefix},
        ).fetchall()[0][0]
