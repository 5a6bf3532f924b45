"""The selection rule and the candidate pools: which tagged documents are enriched (at least k chosen behaviors) or
minimized (none), drawn by DuckDB from the attribute shards in seeded random order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from curate.behaviors import BEHAVIOR_NAMES, Behavior
from curate.builders.cpt.common import VARIANTS, CPTError
from curate.files import atomic_path
from curate.pipelines.query import attribute_shards, open_shards


@dataclass
class CPTSelection:
    behaviors: list[Behavior] = field(default_factory=lambda: list(Behavior))
    min_behaviors: int = 1  # k: enriched documents show at least k of the chosen behaviors
    min_count: int = 1  # a behavior is shown when its count reaches this
    seed: int = 0

    def __post_init__(self):
        if not self.behaviors:
            raise CPTError("choose at least one behavior")
        if not 1 <= self.min_behaviors <= len(self.behaviors):
            raise CPTError(f"--min-behaviors must be between 1 and {len(self.behaviors)} (the number of chosen "
                           "behaviors)")
        if self.min_count < 1:
            raise CPTError("--min-count must be at least 1")

    @property
    def names(self) -> list[str]:
        return [b.value for b in self.behaviors]

    def known(self) -> str:
        # Unknown is not zero: a document with a null count or an error is in neither pool.
        return " AND ".join(["error IS NULL", *(f"{b} IS NOT NULL" for b in self.names)])

    def enriched(self) -> str:
        shown = " + ".join(f"CAST({b} >= {int(self.min_count)} AS INTEGER)" for b in self.names)
        return f"({shown}) >= {int(self.min_behaviors)}"

    def minimized(self) -> str:
        return " AND ".join(f"{b} = 0" for b in self.names)

    def describe(self) -> dict:
        return {
            "behaviors": self.names, "min_behaviors": self.min_behaviors, "min_count": self.min_count,
            "seed": self.seed,
            "enriched_rule": f"{self.known()} AND {self.enriched()}",
            "minimized_rule": f"{self.known()} AND {self.minimized()}",
        }


def tag_files(tags: str | Path) -> list[str]:
    files = attribute_shards(tags)
    if not files:
        raise CPTError(f"no attribute shards under {tags}; run `curate tag` (or `curate tag-llm`) first")
    return files


def select_pools(tags: str | Path, selection: CPTSelection, char_cap: int, path: Path, domain_key: str | None,
                 length_trim: float | None = None) -> dict:
    """Writes the candidate rows of both pools to `path`, each pool in seeded random order and cut once its
    characters pass `char_cap`; returns counts. An id tagged more than once counts once, by the rule in query.py.
    With `length_trim`, both pools are first restricted to their common length range in characters (each pool's
    [trim, 1 - trim] quantiles, intersected): done here, on every candidate, so that the cut pool is drawn from
    inside the range and still holds enough tokens for the budget."""
    files = tag_files(tags)
    with duckdb.connect() as connection:
        columns = set(open_shards(connection, files))
        missing = [c for c in (*selection.names, "id", "error", "n_chars", "classifier") if c not in columns]
        if missing:
            raise CPTError(f"the shards under {tags} have no column {', '.join(missing)}; they are not curate "
                           "attribute shards")
        classifiers = [r[0] for r in connection.sql("SELECT DISTINCT classifier FROM shards ORDER BY 1").fetchall()]
        if len(classifiers) != 1:
            raise CPTError(f"{tags} holds shards of several classifiers ({', '.join(map(str, classifiers))}); "
                           "pass one classifier's folder, e.g. tags/cues_v6")
        domain_column = (domain_key if domain_key in columns
                         else "domain" if domain_key is None and "domain" in columns else None)
        domain = f'CAST("{domain_column}" AS VARCHAR)' if domain_column else "CAST(NULL AS VARCHAR)"
        seed = int(selection.seed)
        connection.execute(f"""
            CREATE TABLE labelled AS
            SELECT id, {", ".join(BEHAVIOR_NAMES)}, classifier, model, prompt_version, n_chars, {domain} AS domain,
                   {"source" if "source" in columns else "NULL::VARCHAR AS source"}, md5(id || ':' || '{seed}') AS draw,
                   CASE WHEN {selection.known()} AND {selection.enriched()} THEN 'enriched'
                        WHEN {selection.known()} AND {selection.minimized()} THEN 'minimized' END AS pool
            FROM shards""")
        connection.execute("ALTER TABLE labelled ADD COLUMN in_range BOOLEAN DEFAULT TRUE")
        length_range, removed_chars = None, {}
        if length_trim is not None:
            length_range, removed_chars = _restrict_chars(connection, float(length_trim))
        with atomic_path(path) as staged:
            connection.execute(f"""
                COPY (SELECT * EXCLUDE (before, in_range) FROM (
                    SELECT *, sum(n_chars) OVER (PARTITION BY pool ORDER BY draw
                                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                        AS before FROM labelled WHERE pool IS NOT NULL AND in_range)
                      WHERE coalesce(before, 0) < {int(char_cap)} ORDER BY pool, draw)
                TO '{staged}' (FORMAT parquet)""")
        counts = dict(connection.sql("SELECT coalesce(pool, 'neither'), count(*) FROM labelled GROUP BY 1").fetchall())
        counts["tagged"] = connection.sql("SELECT count(*) FROM labelled").fetchall()[0][0]
        counts["read_into_pool"] = dict(connection.sql(
            f"SELECT pool, count(*) FROM read_parquet('{path}') GROUP BY 1").fetchall())
    return {"classifier": classifiers[0], "domain_column": domain_column, **counts,
            "length_range_chars": length_range, "length_removed_chars": removed_chars}


def _restrict_chars(connection, trim: float) -> tuple[list[int], dict[str, int]]:
    """Marks candidates outside the two pools' common character range; returns the range and how many each pool lost."""
    if not 0 <= trim < 0.5:
        raise CPTError("--length-trim must be at least 0 and below 0.5")
    bounds = {pool: (lo, hi) for pool, lo, hi in connection.sql(
        f"SELECT pool, quantile_disc(n_chars, {trim}), quantile_disc(n_chars, {1 - trim}) FROM labelled "
        "WHERE pool IS NOT NULL AND n_chars IS NOT NULL GROUP BY pool").fetchall()}
    if set(bounds) != set(VARIANTS):
        return None, {}  # one pool is empty: the budget check reports it, with the counts
    low, high = max(b[0] for b in bounds.values()), min(b[1] for b in bounds.values())
    if low > high:
        raise CPTError(f"the enriched and minimized candidates share no length range (enriched "
                       f"{bounds['enriched'][0]:,}-{bounds['enriched'][1]:,} characters, minimized "
                       f"{bounds['minimized'][0]:,}-{bounds['minimized'][1]:,}): lower --length-trim or use "
                       "--length-match none")
    connection.execute(f"UPDATE labelled SET in_range = coalesce(n_chars BETWEEN {int(low)} AND {int(high)}, FALSE) "
                       "WHERE pool IS NOT NULL")
    removed = dict(connection.sql("SELECT pool, count(*) FROM labelled WHERE pool IS NOT NULL AND NOT in_range "
                                  "GROUP BY pool").fetchall())
    return [int(low), int(high)], {v: int(removed.get(v, 0)) for v in VARIANTS}
