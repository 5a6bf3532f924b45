"""Continued-pretraining corpora: behavior-enriched vs behavior-minimized text at a matched token budget.

    tags --DuckDB--> candidate pools (seeded random order, no id in both, one copy of a repeated id: query.py)
    corpus --datatrove--> pool texts + token counts by the named tokenizer  [--dedup / --decontam on the pool]
    [--require-solution]  problem and worked solution? cue rule, or the is_solution prompt (InferenceRunner)
    pools --match--> enriched (>= k chosen behaviors) and minimized (none), same token total (within the
                     tolerance), same length distribution (stratified on token-length bins x domain; KS reported)
    [--rewrite]  InferenceRunner: each document -> <question>/<thoughts>/<answer>; unparseable rewrites dropped,
                 counted and kept in rejects with the raw output; the set plus more of its pool is rewritten, in
                 rounds, so that both rewritten sets are matched at the budget again
    exports      CPT text (parquet + jsonl), SFT {query, completion} for rewrites, token-packed sequences

Layout:
    OUT/enriched/, OUT/minimized/                  data/train-00000.parquet, README.md card, length plot
    OUT/enriched_rewrite/, OUT/minimized_rewrite/  with --rewrite: id (source id), question, thoughts, answer,
                                                   completion, text; rejects/rewrite.jsonl
    OUT/exports/<dataset>/{cpt,cpt_jsonl,sft,packed}/
    OUT/rejects/                                   unreadable corpus records, duplicate ids, duplicates, contaminated rows
    OUT/.curate/                                   pools, parameters, matching report (cpt.json), logs, the LLM jobs
                                                   (solution/, rewrite/round-N/)

The pass over the corpus (token counting) and the rewrite run on any executor (executors.py). On Slurm the
command submits the job and returns; the same command run again once it is done carries on from there: the
pool folder (OUT/.curate/pool) and the rewrite folder are kept while their inputs and parameters are unchanged.
--dedup and --decontam of the pool run on this machine: the pool is at most --oversample times the budget.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.inference.servers.base import ServerError
from datatrove.pipeline.inference.types import InferenceError
from datatrove.pipeline.writers.parquet import ParquetWriter

from curate import hf_tokenizers
from curate.behaviors import BEHAVIOR_NAMES, Behavior, UnknownBehaviorError, parse_behavior_list
from curate.builders.jobs import CPTJob, server_start
from curate.classifiers.llm import Truncator, read_prompt_files
from curate.classifiers.solution import (
    CUE_VERSION,
    JUDGES,
    SolutionJudgement,
    SolutionPrompt,
    judge_by_cues,
    parse_solution_answer,
)
from curate.console import ProgressBar
from curate.data_cards.cards import (
    rejects_table,
    render_card,
    reproduce_command,
    save_card,
    size_category,
    split_configs,
    stats_table,
)
from curate.data_cards.plots import plot_length_histograms
from curate.errors import CurateError
from curate.files import atomic_open, atomic_path, write_text_atomic
from curate.handoff.export import input_files, run_export
from curate.pipelines.decontam import decontaminate
from curate.pipelines.dedup import dedup as dedup_pool
from curate.pipelines.executors import (
    LOCAL,
    ExecutorOptions,
    Stage,
    input_signature,
    resumable_stage,
    run_stages,
)
from curate.pipelines.llm.job import LLMJobFolder, claim_job, run_llm_job
from curate.pipelines.llm.options import ServerOptions
from curate.pipelines.llm.server import inference_config
from curate.pipelines.query import (
    attribute_shards,
    behavior_stats,
    count_rejects,
    open_shards,
    parquet_files,
    write_kept_copies,
)
from curate.pipelines.readers import InputSpec, make_reader
from curate.pipelines.state import STATE, folder_signature, write_once
from curate.pipelines.steps import ATTRIBUTES, AtomicOutput, KeepFirstCopy, KeepSelected, SplitRejects, batched
from curate.pipelines.tag import file_fingerprints

VARIANTS = ("enriched", "minimized")
PROMPTS_DIR = Path(__file__).parent / "prompts" / "rewrite_v1"
# Characters per token that no real tokenizer exceeds on prose or LaTeX: bounds the pool read from the corpus.
MAX_CHARS_PER_TOKEN = 8
LENGTH_EDGES = (0, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# best (default): both sets at the full budget, their length profiles as alike as both pools allow (shared length
# quantiles; what the pools do not share comes from the nearest strata); the residual KS is reported. strict: both
# pools first cut to their common length range, both sets filled to the profile both can supply, and the build
# refuses when that range holds too few tokens (`common` before). range: the cut only. none: stratified filling only.
LENGTH_MATCH_MODES = ("best", "strict", "range", "none")
LENGTH_MATCH_ALIASES = {"common": "strict"}

POOL_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("pool", pa.string()),
        ("draw", pa.string()),
        ("domain", pa.string()),
        ("n_tokens", pa.int64()),
        ("n_chars", pa.int64()),
        *[(name, pa.int32()) for name in BEHAVIOR_NAMES],
        ("classifier", pa.string()),
        ("model", pa.string()),
        ("prompt_version", pa.string()),
    ]
)


class CPTError(CurateError, ValueError):
    """The request cannot be met (bad options, too few candidates); the message says what to change."""


def parse_token_count(value: str | int) -> int:
    """'8.3M', '500k', '1.2B', '2e6' or an integer."""
    if isinstance(value, int):
        count = value
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmb]?)\s*", str(value), re.IGNORECASE)
        if not match:
            raise CPTError(f"--tokens {value!r}: give a number such as 8.3M, 500k or 2000000")
        count = round(float(match.group(1)) * {"": 1, "k": 10**3, "m": 10**6, "b": 10**9}[match.group(2).lower()])
    if count < 1:
        raise CPTError("--tokens must be positive")
    return count


def load_tokenizer(name_or_path: str):
    try:
        return hf_tokenizers.load_tokenizer(name_or_path)
    except Exception as error:
        raise CPTError(f"cannot load the tokenizer {name_or_path!r}: {type(error).__name__}: {error}") from error


# --------------------------------------------------------------------------------------------- #
# Selection rule
# --------------------------------------------------------------------------------------------- #
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
            raise CPTError(f"--min-behaviors must be between 1 and {len(self.behaviors)} (the number of chosen behaviors)")
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
            "behaviors": self.names, "min_behaviors": self.min_behaviors, "min_count": self.min_count, "seed": self.seed,
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
            raise CPTError(f"the shards under {tags} have no column {', '.join(missing)}; they are not curate attribute shards")
        classifiers = [r[0] for r in connection.sql("SELECT DISTINCT classifier FROM shards ORDER BY 1").fetchall()]
        if len(classifiers) != 1:
            raise CPTError(f"{tags} holds shards of several classifiers ({', '.join(map(str, classifiers))}); "
                           "pass one classifier's folder, e.g. tags/cues_v6")
        domain_column = domain_key if domain_key in columns else "domain" if domain_key is None and "domain" in columns else None
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
                    SELECT *, sum(n_chars) OVER (PARTITION BY pool ORDER BY draw ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                        AS before FROM labelled WHERE pool IS NOT NULL AND in_range)
                      WHERE coalesce(before, 0) < {int(char_cap)} ORDER BY pool, draw)
                TO '{staged}' (FORMAT parquet)""")
        counts = dict(connection.sql("SELECT coalesce(pool, 'neither'), count(*) FROM labelled GROUP BY 1").fetchall())
        counts["tagged"] = connection.sql("SELECT count(*) FROM labelled").fetchall()[0][0]
        counts["read_into_pool"] = dict(connection.sql(f"SELECT pool, count(*) FROM read_parquet('{path}') GROUP BY 1").fetchall())
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
        raise CPTError(f"the enriched and minimized candidates share no length range (enriched {bounds['enriched'][0]:,}-"
                       f"{bounds['enriched'][1]:,} characters, minimized {bounds['minimized'][0]:,}-"
                       f"{bounds['minimized'][1]:,}): lower --length-trim or use --length-match none")
    connection.execute(f"UPDATE labelled SET in_range = coalesce(n_chars BETWEEN {int(low)} AND {int(high)}, FALSE) "
                       "WHERE pool IS NOT NULL")
    removed = dict(connection.sql("SELECT pool, count(*) FROM labelled WHERE pool IS NOT NULL AND NOT in_range "
                                  "GROUP BY pool").fetchall())
    return [int(low), int(high)], {v: int(removed.get(v, 0)) for v in VARIANTS}


# --------------------------------------------------------------------------------------------- #
# Pool texts and token counts (datatrove)
# --------------------------------------------------------------------------------------------- #
class CountTokens(PipelineStep):
    """Counts each document's tokens with the named tokenizer (no special tokens) in batches."""

    name = "🔢 Count tokens"
    type = "🔢 - TOKENIZER"

    def __init__(self, tokenizer: str, domain_key: str | None, batch_size: int = 256):
        super().__init__()
        self.tokenizer = tokenizer
        self.domain_key = domain_key
        self.batch_size = batch_size

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        tokenizer = load_tokenizer(self.tokenizer)
        for batch in batched(data, self.batch_size):
            encoded = tokenizer([d.text for d in batch], add_special_tokens=False)["input_ids"]
            for document, ids in zip(batch, encoded, strict=True):
                row = document.metadata[ATTRIBUTES]
                row["n_tokens"] = len(ids)
                row["n_chars"] = len(document.text)
                if row.get("domain") is None and self.domain_key and document.metadata.get(self.domain_key) is not None:
                    row["domain"] = str(document.metadata[self.domain_key])
                self.stat_update("tokens", value=len(ids))
                yield document


class PoolWriter(AtomicOutput, ParquetWriter):
    name = "📒 CPT pool"

    def __init__(self, output_folder: str):
        super().__init__(output_folder, output_filename="train-${rank}.parquet", schema=POOL_SCHEMA,
                         adapter=lambda _w, d: {**{k: d.metadata[ATTRIBUTES].get(k) for k in POOL_SCHEMA.names}, "text": d.text})


# --------------------------------------------------------------------------------------------- #
# Matching
# --------------------------------------------------------------------------------------------- #
@dataclass
class Candidate:
    id: str
    n_tokens: int
    domain: str | None


@dataclass
class MatchReport:
    budget: int
    tolerance: float
    enriched_tokens: int
    minimized_tokens: int
    enriched_documents: int
    minimized_documents: int
    ks_statistic: float
    length_edges: list[int]
    strata: int
    strata_short: list[str]  # strata the minimized pool could not fill from the same domain
    length_match: str = "none"
    length_range: list[int] | None = None  # common token-length range both pools were cut to
    length_removed: dict[str, int] = field(default_factory=dict)  # candidates each pool lost to that range
    length_weights: list[float] | None = None  # strict: token share of each length bin, both sets
    # best: per-bin token targets of each set, the KS of those targets (what the pools allow at this budget) and
    # the tokens both pools hold in common strata
    length_targets: dict[str, list[int]] | None = None
    target_ks: float | None = None
    shared_tokens: int | None = None
    pool_tokens: dict[str, int] = field(default_factory=dict)  # tokens of each candidate pool the matching saw
    pool_documents: dict[str, int] = field(default_factory=dict)
    pool_used: dict[str, float] = field(default_factory=dict)  # share of each pool's tokens in its set
    # documents per LENGTH_EDGES bucket: {"enriched_pool", "enriched", "minimized_pool", "minimized"}
    length_histogram: dict[str, list[int]] = field(default_factory=dict)


def length_match_mode(value: str) -> str:
    """The mode's name (`common` is the old name of `strict`); a clear error for anything else."""
    mode = LENGTH_MATCH_ALIASES.get(value, value)
    if mode not in LENGTH_MATCH_MODES:
        raise CPTError(f"--length-match must be one of {', '.join(LENGTH_MATCH_MODES)}, not {value!r}")
    return mode


def length_histogram(lengths: list[int]) -> list[int]:
    """Documents per LENGTH_EDGES bucket (the last bucket is open)."""
    return np.bincount(np.searchsorted(LENGTH_EDGES[1:], lengths, "right"), minlength=len(LENGTH_EDGES)).tolist()


def ks_statistic(a: list[int] | np.ndarray, b: list[int] | np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: the largest gap between the two empirical CDFs."""
    a, b = np.sort(np.asarray(a)), np.sort(np.asarray(b))
    if not len(a) or not len(b):
        return 1.0
    points = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, points, "right") / len(a) - np.searchsorted(b, points, "right") / len(b))))


def _length_edges(lengths: list[int], bins: int) -> list[int]:
    """Quantile edges of the enriched lengths: strata with equal enriched document counts."""
    quantiles = np.quantile(np.asarray(lengths), np.linspace(0, 1, bins + 1)[1:-1]) if bins > 1 else []
    return sorted({int(q) for q in quantiles})


def _adjust(chosen: dict[str, Candidate], pool: list[Candidate], total: int, target: float, slack: float) -> int:
    """Adds, removes or swaps one document at a time (the move that brings `total` closest to `target`) until
    the total is within `slack`; returns the new total. Used only for the last few documents of a set."""
    unused = sorted((c for c in pool if c.id not in chosen), key=lambda c: c.n_tokens)
    unused_lengths = [c.n_tokens for c in unused]

    def closest_unused(length: float) -> int:
        i = min(int(np.searchsorted(unused_lengths, length)), len(unused) - 1)
        return i - 1 if i > 0 and abs(unused_lengths[i - 1] - length) < abs(unused_lengths[i] - length) else i

    for _ in range(len(pool)):
        gap = target - total
        if abs(gap) <= slack:
            break
        moves = []
        if gap > 0 and unused:
            i = closest_unused(gap)
            moves.append((abs(gap - unused_lengths[i]), None, i))
        if gap < 0 and chosen:
            c = min(chosen.values(), key=lambda c: abs(c.n_tokens + gap))
            moves.append((abs(gap + c.n_tokens), c.id, None))
        if unused:
            for c in chosen.values():
                i = closest_unused(c.n_tokens + gap)
                moves.append((abs(gap - unused_lengths[i] + c.n_tokens), c.id, i))
        if not moves:
            break
        new_gap, removed, added = min(moves, key=lambda m: m[0])
        if new_gap >= abs(gap):
            break
        if removed is not None:
            total -= chosen.pop(removed).n_tokens
        if added is not None:
            c = unused.pop(added)
            unused_lengths.pop(added)
            chosen[c.id] = c
            total += c.n_tokens
    return total


def common_length_range(a: list[int], b: list[int], trim: float = 0.0) -> tuple[int, int] | None:
    """The intersection of the two samples' [trim, 1 - trim] quantile ranges; None when they do not overlap."""
    if not 0 <= trim < 0.5:
        raise CPTError("--length-trim must be at least 0 and below 0.5")
    if not len(a) or not len(b):
        return None
    low = max(int(np.quantile(a, trim, method="lower")), int(np.quantile(b, trim, method="lower")))
    high = min(int(np.quantile(a, 1 - trim, method="higher")), int(np.quantile(b, 1 - trim, method="higher")))
    return (low, high) if low <= high else None


def _common_weights(enriched: list[Candidate], minimized: list[Candidate], bins: int) -> tuple[list[int], list[float]]:
    """Length-bin edges (quantiles of both pools together) and per-bin token shares min(enriched, minimized),
    normalised: the length profile both pools can supply in proportion to their size."""
    edges = _length_edges([c.n_tokens for c in enriched + minimized], bins)
    shares = []
    for pool in (enriched, minimized):
        mass = np.bincount(np.searchsorted(edges, [c.n_tokens for c in pool], "right"),
                           weights=[c.n_tokens for c in pool], minlength=len(edges) + 1)
        shares.append(mass / mass.sum())
    common = np.minimum(*shares)
    return edges, (common / common.sum()).tolist()


def shared_length_edges(a: list[int], b: list[int], bins: int) -> list[int]:
    """Quantile edges of the two pools' lengths, each pool weighted equally (a pool five times larger does not set
    the strata alone): strata both distributions are cut into."""
    if bins <= 1 or not len(a) or not len(b):
        return []
    lengths = np.concatenate([np.asarray(a, dtype=float), np.asarray(b, dtype=float)])
    weights = np.concatenate([np.full(len(a), 0.5 / len(a)), np.full(len(b), 0.5 / len(b))])
    order = np.argsort(lengths, kind="stable")
    cumulative = np.cumsum(weights[order])
    positions = np.searchsorted(cumulative, np.linspace(0, 1, bins + 1)[1:-1], "left")
    return sorted({int(lengths[order][min(p, len(order) - 1)]) for p in positions})


def _bin_mass(pool: list[Candidate], edges: list[int]) -> np.ndarray:
    return np.bincount(np.searchsorted(edges, [c.n_tokens for c in pool], "right"),
                       weights=[c.n_tokens for c in pool], minlength=len(edges) + 1).astype(float)


def best_effort_targets(mass_e: np.ndarray, mass_m: np.ndarray, budget: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-bin token targets for both sets at the full budget, as alike as the two pools allow.

    Where both pools can supply the budget from the mass they share (per bin min(enriched, minimized)), both sets get
    that shared profile scaled to the budget: identical targets. Otherwise both take all of the shared mass and each
    fills the rest from its own surplus bins, placed by a linear program that minimises the largest gap between the
    two cumulative token profiles (the KS statistic of the targets), then the summed gap: the rest comes from the
    strata nearest the other set's."""
    from scipy.optimize import linprog

    shared = np.minimum(mass_e, mass_m)
    if shared.sum() >= budget:
        target = budget * shared / shared.sum()
        return target, target.copy()
    rest = budget - shared.sum()
    surplus_e, surplus_m = mass_e - shared, mass_m - shared
    n = len(shared)
    # Variables: r_e (n), r_m (n), t, u (n - 1). Minimise t + small * sum(u), |cum(r_e - r_m)_k| <= u_k <= t.
    small = 1e-3 / max(n, 1)
    cost = np.concatenate([np.zeros(2 * n), [1.0], np.full(n - 1, small)])
    rows, bounds_upper = [], []
    for k in range(n - 1):
        cum = np.concatenate([np.where(np.arange(n) <= k, 1.0, 0.0), np.where(np.arange(n) <= k, -1.0, 0.0)])
        for sign in (1.0, -1.0):
            row = np.zeros(len(cost))
            row[: 2 * n] = sign * cum
            row[2 * n + 1 + k] = -1.0
            rows.append(row)
            bounds_upper.append(0.0)
        row = np.zeros(len(cost))
        row[2 * n + 1 + k], row[2 * n] = 1.0, -1.0
        rows.append(row)
        bounds_upper.append(0.0)
    equal = np.zeros((2, len(cost)))
    equal[0, :n], equal[1, n: 2 * n] = 1.0, 1.0
    bounds = [(0, s) for s in surplus_e] + [(0, s) for s in surplus_m] + [(0, None)] * n
    solved = linprog(cost, A_ub=np.array(rows) if rows else None, b_ub=np.array(bounds_upper) if rows else None,
                     A_eq=equal, b_eq=[rest, rest], bounds=bounds, method="highs")
    if not solved.success:  # only when a pool holds less than the budget, which the caller checked
        raise CPTError(f"cannot place the {rest:,.0f} tokens the two pools do not share: {solved.message}")
    return shared + solved.x[:n], shared + solved.x[n: 2 * n]


def _fill(pool: list[Candidate], key, targets: dict, high: float, chosen: dict | None = None) -> dict[str, Candidate]:
    """Takes candidates in order while each brings its stratum closer to its target and the total stays below
    `high`; `chosen` (kept) are already in."""
    chosen = dict(chosen or {})
    filled = dict.fromkeys(targets, 0.0)
    for c in chosen.values():
        if key(c) in filled:
            filled[key(c)] += c.n_tokens
    total = sum(c.n_tokens for c in chosen.values())
    for c in pool:
        k = key(c)
        if c.id in chosen or k not in targets or targets[k] - filled[k] < c.n_tokens / 2 or total + c.n_tokens > high:
            continue
        chosen[c.id] = c
        filled[k] += c.n_tokens
        total += c.n_tokens
    return chosen


def token_profile_ks(a: np.ndarray, b: np.ndarray) -> float:
    """Largest gap between two per-bin token profiles' cumulative shares."""
    return float(np.max(np.abs(np.cumsum(a) / a.sum() - np.cumsum(b) / b.sum()))) if a.sum() and b.sum() else 1.0


def _match_best(enriched: list[Candidate], minimized: list[Candidate], budget: int, tolerance: float,
                bins: int) -> tuple[list[Candidate], dict[str, Candidate], dict]:
    """Best-effort length matching at the full budget (see `best_effort_targets`); both lists in seeded random order.
    The enriched set is filled to its per-bin targets; the minimized set to its own, corrected by how far the
    enriched fill landed from its targets (so shared strata follow the set actually drawn), and within a stratum
    by the enriched set's domain mix. Both totals are then adjusted one document at a time."""
    half = tolerance / 2
    low, high = budget * (1 - half), budget * (1 + half)
    for variant, pool in zip(VARIANTS, (enriched, minimized)):
        held = sum(c.n_tokens for c in pool)
        if held < low:
            raise CPTError(f"the {variant} pool holds {held:,} tokens, fewer than --tokens {budget:,}: lower --tokens, "
                           "--min-behaviors or --min-count, raise --oversample, or tag more of the corpus")
    edges = shared_length_edges([c.n_tokens for c in enriched], [c.n_tokens for c in minimized], bins)
    mass_e, mass_m = _bin_mass(enriched, edges), _bin_mass(minimized, edges)
    target_e, target_m = best_effort_targets(mass_e, mass_m, budget)

    def length_bin(c: Candidate) -> int:
        return int(np.searchsorted(edges, c.n_tokens, "right"))

    picked = _fill(enriched, length_bin, dict(enumerate(target_e)), high)
    total_e = sum(c.n_tokens for c in picked.values())
    if total_e < low:
        total_e = _adjust(picked, enriched, total_e, budget, half * budget)
    if abs(total_e - budget) > half * budget:
        raise CPTError(f"cannot fill {budget:,} tokens within {100 * half:g} % from the enriched documents (reached "
                       f"{total_e:,}): its documents are too long for this budget; raise --tokens or --tolerance")
    order = {c.id: i for i, c in enumerate(enriched)}
    chosen_e = sorted(picked.values(), key=lambda c: order[c.id])
    drawn_e = _bin_mass(chosen_e, edges)
    # Shared strata follow what the enriched set actually holds there, within what the minimized pool has.
    goal_m = np.clip(target_m + np.where(target_m > 0, drawn_e - target_e, 0.0), 0.0, mass_m)
    domain_mass: dict[tuple, float] = {}
    for c in chosen_e:
        domain_mass[(c.domain or "", length_bin(c))] = domain_mass.get((c.domain or "", length_bin(c)), 0) + c.n_tokens
    targets: dict[tuple, float] = {}
    for (d, b), mass in domain_mass.items():
        targets[(d, b)] = goal_m[b] * mass / drawn_e[b]
    for b, goal in enumerate(goal_m):
        if drawn_e[b] == 0 and goal > 0:
            targets[("*", b)] = goal
    by_domain = {b for (_, b) in domain_mass}

    def stratum(c: Candidate) -> tuple:
        b = length_bin(c)
        return ((c.domain or "") if b in by_domain else "*", b)

    chosen_m = _fill(minimized, stratum, targets, total_e * (1 + half))
    # A domain the minimized pool lacks: the stratum's deficit is filled from the same length bin in other domains.
    chosen_m = _fill(minimized, length_bin, dict(enumerate(goal_m)), total_e * (1 + half), chosen_m)
    short = [f"{d if d != '*' else '-'} / length bin {b}" for (d, b), t in targets.items()
             if sum(c.n_tokens for c in chosen_m.values() if stratum(c) == (d, b)) < t * (1 - tolerance)]
    total_m = _adjust(chosen_m, minimized, sum(c.n_tokens for c in chosen_m.values()), total_e, half * total_e)
    if abs(total_e - total_m) > half * total_e:
        raise CPTError(f"cannot match {total_e:,} enriched tokens with the minimized pool (reached {total_m:,}; "
                       f"{len(minimized):,} candidates): its documents are too long for the tolerance; raise --tolerance")
    details = {"edges": edges, "strata": len(targets), "short": short,
               "target_ks": token_profile_ks(target_e, target_m),
               "shared_tokens": int(np.minimum(mass_e, mass_m).sum()),
               "targets": {"enriched": [round(float(t)) for t in target_e], "minimized": [round(float(t)) for t in target_m]}}
    return chosen_e, chosen_m, details


def match_pools(enriched: list[Candidate], minimized: list[Candidate], budget: int, tolerance: float = 0.01,
                length_bins: int = 10, length_match: str = "none",
                length_trim: float = 0.0,
                removed_before: dict[str, int] | None = None) -> tuple[list[str], list[str], MatchReport]:
    """Both lists in seeded random order. Enriched: taken in order until the budget is reached (within half the
    tolerance). Minimized: filled stratum by stratum (domain x enriched length quantile) to the token mass the
    enriched set has there, then adjusted one document at a time until its total is within half the tolerance of
    the enriched total, so both are within the tolerance of the budget and of each other.

    length_match 'range' first cuts both pools to their common token-length range (`length_trim` quantiles off
    each end of each pool, then intersected): stratified filling cannot match lengths one pool does not have.
    'strict' also fills the enriched set bin by bin to the token shares both pools can supply (see
    `_common_weights`), so the minimized set is not asked for lengths that are rare in its pool; it refuses when the
    common range holds too few tokens. 'best' never cuts: see `_match_best`. `removed_before`: candidates per pool the
    caller already left out for their length, counted in that refusal."""
    if not 0 < tolerance < 0.5:
        raise CPTError("--tolerance must be between 0 and 0.5")
    length_match = length_match_mode(length_match)
    if length_match == "best":
        chosen_e, chosen_m, best = _match_best(enriched, minimized, budget, tolerance, length_bins)
        ids_m = [c.id for c in minimized if c.id in chosen_m]
        lengths_m = [chosen_m[i].n_tokens for i in ids_m]
        report = MatchReport(
            budget=budget, tolerance=tolerance, enriched_tokens=sum(c.n_tokens for c in chosen_e),
            minimized_tokens=sum(lengths_m), enriched_documents=len(chosen_e), minimized_documents=len(ids_m),
            ks_statistic=ks_statistic([c.n_tokens for c in chosen_e], lengths_m), length_edges=best["edges"],
            strata=best["strata"], strata_short=best["short"], length_match=length_match,
            length_targets=best["targets"], target_ks=best["target_ks"], shared_tokens=best["shared_tokens"])
        _pool_figures(report, enriched, minimized, [c.n_tokens for c in chosen_e], lengths_m)
        return [c.id for c in chosen_e], ids_m, report
    half = tolerance / 2
    low, high = budget * (1 - half), budget * (1 + half)
    length_range, removed, weights = None, {}, None
    all_enriched, all_minimized = enriched, minimized
    if length_match != "none":
        length_range = common_length_range([c.n_tokens for c in enriched], [c.n_tokens for c in minimized], length_trim)
        if length_range is None:
            raise CPTError("the enriched and minimized candidates share no token-length range: lower --length-trim "
                           "or use --length-match none")
        kept = {v: [c for c in pool if length_range[0] <= c.n_tokens <= length_range[1]]
                for v, pool in zip(VARIANTS, (enriched, minimized))}
        removed = {"enriched": len(enriched) - len(kept["enriched"]), "minimized": len(minimized) - len(kept["minimized"])}
        enriched, minimized = kept["enriched"], kept["minimized"]
    targets = None
    if length_match == "strict":
        weight_edges, weights = _common_weights(enriched, minimized, length_bins)
        targets = [budget * w for w in weights]
        filled_bins = [0] * len(targets)
    chosen_e, total_e = [], 0
    for candidate in enriched:
        if total_e >= low:
            break
        if targets is not None:
            b = int(np.searchsorted(weight_edges, candidate.n_tokens, "right"))
            # As for the minimized strata: take the document while it brings its bin closer to its target.
            if targets[b] - filled_bins[b] < candidate.n_tokens / 2:
                continue
            filled_bins[b] += candidate.n_tokens
        # A document that would overshoot is passed over only in the last few documents of the budget.
        if total_e + candidate.n_tokens <= high:
            chosen_e.append(candidate)
            total_e += candidate.n_tokens
        elif targets is not None:
            filled_bins[b] -= candidate.n_tokens
    available = sum(c.n_tokens for c in enriched)
    if available < low:
        # Candidates cut before this call (the character range run_cpt applies to every candidate) count too.
        outside = removed["enriched"] + (removed_before or {}).get("enriched", 0) if length_range else 0
        where = (f" inside the common length range {length_range[0]:,}-{length_range[1]:,} tokens ({outside:,} "
                 "candidates outside it)" if length_range else "")
        raise CPTError(f"the enriched pool holds {available:,} tokens{where}, fewer than --tokens {budget:,}: lower --tokens, "
                       "--min-behaviors or --min-count, or tag more of the corpus"
                       + (", or raise --oversample, or use --length-match best (the default: it matches the lengths as "
                          "closely as both pools allow at the full budget)" if length_range else ""))
    if total_e < low:
        picked = {c.id: c for c in chosen_e}
        total_e = _adjust(picked, enriched, total_e, budget, half * budget)
        order = {c.id: i for i, c in enumerate(enriched)}
        chosen_e = sorted(picked.values(), key=lambda c: order[c.id])
        if abs(total_e - budget) > half * budget:
            raise CPTError(f"cannot fill {budget:,} tokens within {100 * half:g} % from the enriched documents (reached "
                           f"{total_e:,}): its documents are too long for this budget; raise --tokens or --tolerance")
    edges = _length_edges([c.n_tokens for c in chosen_e], length_bins)

    def stratum(c: Candidate) -> tuple:
        return (c.domain or "", int(np.searchsorted(edges, c.n_tokens, "right")))

    target: dict[tuple, int] = {}
    for c in chosen_e:
        target[stratum(c)] = target.get(stratum(c), 0) + c.n_tokens
    filled = dict.fromkeys(target, 0)
    chosen_m: dict[str, Candidate] = {}
    for c in minimized:
        s = stratum(c)
        # Take the document while it brings the stratum closer to its target.
        if s in target and target[s] - filled[s] >= c.n_tokens / 2:
            chosen_m[c.id] = c
            filled[s] += c.n_tokens
    short = [f"{d or '-'} / length bin {b}" for (d, b), t in target.items() if filled[(d, b)] < t * (1 - tolerance)]
    # A domain the minimized pool lacks: its deficit is filled from the same length bin in other domains.
    deficit: dict[int, int] = {}
    for (d, b), t in target.items():
        if filled[(d, b)] < t * (1 - tolerance):
            deficit[b] = deficit.get(b, 0) + t - filled[(d, b)]
    for c in minimized:
        b = stratum(c)[1]
        if c.id not in chosen_m and deficit.get(b, 0) >= c.n_tokens / 2:
            chosen_m[c.id] = c
            deficit[b] -= c.n_tokens
    total_m = sum(c.n_tokens for c in chosen_m.values())
    total_m = _adjust(chosen_m, minimized, total_m, total_e, half * total_e)
    if abs(total_e - total_m) > half * total_e:
        raise CPTError(f"cannot match {total_e:,} enriched tokens with the minimized pool (reached {total_m:,}; "
                       f"{len(minimized):,} candidates): the minimized pool is too small or its documents too long "
                       "for the tolerance" + (" inside the common length range; try --length-match best"
                                              if length_range else ""))
    order = {c.id: i for i, c in enumerate(minimized)}
    ids_m = sorted(chosen_m, key=order.__getitem__)
    report = MatchReport(
        budget=budget, tolerance=tolerance, enriched_tokens=total_e, minimized_tokens=total_m,
        enriched_documents=len(chosen_e), minimized_documents=len(ids_m),
        ks_statistic=ks_statistic([c.n_tokens for c in chosen_e], [chosen_m[i].n_tokens for i in ids_m]),
        length_edges=edges, strata=len(target), strata_short=short, length_match=length_match,
        length_range=list(length_range) if length_range else None, length_removed=removed, length_weights=weights,
    )
    _pool_figures(report, all_enriched, all_minimized, [c.n_tokens for c in chosen_e], [chosen_m[i].n_tokens for i in ids_m])
    return [c.id for c in chosen_e], ids_m, report


def _pool_figures(report: MatchReport, enriched: list[Candidate], minimized: list[Candidate], lengths_e: list[int],
                  lengths_m: list[int]) -> None:
    """Pool sizes, the share of each pool's tokens its set uses, and the length histograms of pools and sets."""
    for variant, pool, lengths in (("enriched", enriched, lengths_e), ("minimized", minimized, lengths_m)):
        held = sum(c.n_tokens for c in pool)
        report.pool_tokens[variant], report.pool_documents[variant] = held, len(pool)
        report.pool_used[variant] = sum(lengths) / held if held else 0.0
        report.length_histogram[f"{variant}_pool"] = length_histogram([c.n_tokens for c in pool])
        report.length_histogram[variant] = length_histogram(lengths)


# --------------------------------------------------------------------------------------------- #
# Rewrite: question / thoughts / answer through the LLM backends
# --------------------------------------------------------------------------------------------- #
class RewriteParseError(ValueError):
    pass


@dataclass(frozen=True)
class RewritePrompts:
    system: str
    document: str
    instructions: dict[str, str]  # variant -> instructions
    version: str

    @classmethod
    def load(cls, directory: Path = PROMPTS_DIR) -> RewritePrompts:
        texts, version = read_prompt_files(directory)
        instructions = {v: texts[f"instructions_{v}"] for v in VARIANTS}
        return cls(texts["system"], texts["document"], instructions, version)

    def messages(self, document: str, variant: str) -> list[dict]:
        # Document first, instructions after: the same layout as llm_v1, so a prefix cache can reuse the document.
        user = f"{self.document.replace('{document}', document)}\n\n{self.instructions[variant]}"
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


SECTIONS = ("question", "thoughts", "answer")
THINK_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
HEADING = re.compile(r"^\s*(?:#{1,4}\s*)?\**\s*(question|thoughts?|reasoning|answer|final answer)\s*\**\s*:?\s*\**\s*(.*)$",
                     re.IGNORECASE)
HEADING_NAMES = {"question": "question", "thought": "thoughts", "thoughts": "thoughts", "reasoning": "thoughts",
                 "answer": "answer", "final answer": "answer"}


def _tagged(text: str, name: str, truncated: bool) -> str | None:
    opened = re.search(rf"<\s*{name}\s*>", text, re.IGNORECASE)
    if not opened:
        return None
    rest = text[opened.end():]
    closed = re.search(rf"<\s*/\s*{name}\s*>", rest, re.IGNORECASE)
    if closed:
        return rest[: closed.start()].strip()
    following = [m.start() for s in SECTIONS if s != name for m in [re.search(rf"<\s*{s}\s*>", rest, re.IGNORECASE)] if m]
    if following:
        return rest[: min(following)].strip()
    # An unclosed last section is whole only when the model stopped by itself.
    return None if truncated else rest.strip()


def _headed(text: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        match = HEADING.match(line)
        if match and HEADING_NAMES[match.group(1).lower()] not in sections:
            current = HEADING_NAMES[match.group(1).lower()]
            sections[current] = [match.group(2)] if match.group(2).strip() else []
        elif current:
            sections[current].append(line)
    return {k: "\n".join(v).strip().strip("*").strip() for k, v in sections.items()}


def parse_rewrite(output: str | None, finish_reason: str | None = "stop") -> dict[str, str]:
    """<question>/<thoughts>/<answer> from a model's rewrite; headed sections ('Question:', '**Answer:**') are read
    where the tags are missing. Raises RewriteParseError without a question or an answer; thoughts may be empty."""
    if not output or not output.strip():
        raise RewriteParseError("empty output")
    truncated = finish_reason == "length"
    text = THINK_BLOCK.sub("", output)
    found = {name: _tagged(text, name, truncated) for name in SECTIONS}
    if not (found["question"] and found["answer"]):
        headed = _headed(text)
        if headed.get("question") and headed.get("answer") and not truncated:
            found = {name: found[name] or headed.get(name) for name in SECTIONS}
    missing = [name for name in ("question", "answer") if not found[name]]
    if missing:
        suffix = " (the output was cut at the token limit)" if truncated else ""
        raise RewriteParseError(f"no {' and no '.join(missing)}{suffix}")
    return {name: found[name] or "" for name in SECTIONS}


def completion_text(thoughts: str, answer: str) -> str:
    return f"<think>\n{thoughts}\n</think>\n<answer>\n{answer}\n</answer>"


def cpt_text(question: str, thoughts: str, answer: str) -> str:
    return f"<question>\n{question}\n</question>\n<thoughts>\n{thoughts}\n</thoughts>\n<answer>\n{answer}\n</answer>"


@dataclass(frozen=True)
class DocumentJobOptions(ServerOptions):
    """The server (ServerOptions) plus what every cpt LLM job over whole documents needs: the truncation of each
    document and the checkpoint size. A job adds its output budget and says how long one request may be."""

    tp: int | None = 1
    tokenizer: str | None = None  # the model's tokenizer, for truncation (default: the model)
    max_doc_tokens: int = 3072
    records_per_chunk: int = 500


@dataclass(frozen=True)
class RewriteOptions(DocumentJobOptions):
    """The rewrite's own budget."""

    max_new_tokens: int = 4096

    def context_tokens(self) -> int:
        """One request: the document, the prompt (under 1024 tokens) and an output as long as the document."""
        return self.max_doc_tokens + self.max_new_tokens + 1024


REWRITE_KEY = "curate_rewrite"
REWRITE_SCHEMA = pa.schema([
    ("id", pa.string()), ("variant", pa.string()), ("question", pa.string()), ("thoughts", pa.string()),
    ("answer", pa.string()), ("error", pa.string()), ("raw", pa.string()), ("finish_reason", pa.string()),
    ("truncated", pa.bool_()), ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
])


@contextmanager
def _document_job_context(step: str, tokenizer: str, max_doc_tokens: int, progress: bool, arguments: dict):
    """What each rollout of a cpt LLM job receives besides the document: the job's own `arguments` (prompts,
    output budget), the truncator to the document budget and the job's one progress bar, closed when the job ends."""
    bar = ProgressBar(step, enabled=progress)
    try:
        yield {**arguments, "truncator": Truncator(tokenizer, max_doc_tokens), "bar": bar}
    finally:
        bar.close()


async def _ask_about_document(document, generate, truncator, messages, max_tokens: int) -> tuple[object, bool, str | None]:
    """One greedy request about one document cut to its token budget, for both LLM jobs of cpt: (the result,
    truncated, None), or (None, truncated, why) for a document the tokenizer cannot handle or a failed request:
    such a document becomes a row with its reason, never a crash. A dead server (ServerError) is raised: the task
    fails and a rerun resumes from the checkpoint."""
    try:
        text, truncated, _ = await asyncio.to_thread(truncator, document.text)
    except Exception as error:  # noqa: BLE001 - a document the tokenizer cannot handle is kept with its reason
        return None, False, f"tokenize: {type(error).__name__}: {error}"
    try:
        result = await generate({"messages": messages(text), "max_tokens": max_tokens, "temperature": 0.0})
    except ServerError:
        raise
    except Exception as error:  # noqa: BLE001 - a failed request is a row with its reason; a dead server re-raised above
        message = error.error if isinstance(error, InferenceError) else error
        return None, truncated, f"request: {type(error).__name__}: {str(message)[:300]}"
    return result, truncated, None


async def rewrite_rollout(document, generate, prompts: RewritePrompts, truncator, max_new_tokens: int, bar) -> dict:
    """One document, one request; always a row: a failed request or an unreadable rewrite is an error, not a crash."""
    variant = document.metadata["variant"]
    result, truncated, failure = await _ask_about_document(
        document, generate, truncator, lambda text: prompts.messages(text, variant), max_new_tokens)
    bar.advance()
    row = {"variant": variant, "question": None, "thoughts": None, "answer": None, "error": failure,
           "raw": None, "finish_reason": None, "truncated": truncated, "prompt_tokens": 0, "completion_tokens": 0}
    if result is None:
        return row
    row.update(raw=result.text, finish_reason=result.finish_reason,
               prompt_tokens=int(result.usage.get("prompt_tokens") or 0),
               completion_tokens=int(result.usage.get("completion_tokens") or 0))
    try:
        row.update(parse_rewrite(result.text, result.finish_reason))
    except RewriteParseError as error:
        row["error"] = f"parse: {error}"
    return row


class RewriteWriter(AtomicOutput, ParquetWriter):
    """One parquet file per checkpoint chunk, written as NAME.partial and renamed when the chunk closes."""

    name = "📒 Rewrites"

    def __init__(self, output_folder: str):
        super().__init__(output_folder, output_filename="rewrites_${rank}_${chunk_index}.parquet", schema=REWRITE_SCHEMA,
                         adapter=lambda _w, d: {**d.metadata[REWRITE_KEY][0], "id": d.id},
                         use_content_defined_chunking=False, max_file_size=-1)



@dataclass
class RewriteResult:
    kept: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # variant -> reason -> rows
    tokens: dict[str, int] = field(default_factory=dict)
    prompt_version: str = ""
    seconds: float = 0.0
    # The two rewritten sets matched on tokens again: tokens before (every kept rewrite) and after, and why not
    tokens_before: dict[str, int] = field(default_factory=dict)
    rematched: bool = False
    rematch_note: str = ""
    rematch_ks: float | None = None
    budget: int | None = None  # the budget the rewritten sets are matched at (None: the smaller rewritten total)
    rounds: int = 0  # rewrite rounds run: the first rewrites the set and a margin, later ones what is still missing
    # variant -> documents rewritten, how many of them from the set (the rest: more of the same pool), source tokens
    sources: dict[str, dict[str, int]] = field(default_factory=dict)


def rematch_rewrites(output: Path, result: RewriteResult, tolerance: float, length_bins: int,
                     order: dict[str, list[str]] | None = None) -> None:
    """Matches OUT/enriched_rewrite and OUT/minimized_rewrite on tokens again (best-effort lengths) at
    `result.budget` where both sides' kept rewrites hold it, else at the smaller of the two rewritten totals: a
    rewrite changes each document's length, and not by the same factor on both sides. `order`: each side's rewrite
    sources in draw order (the set's documents first), default the order of OUT/<variant>. Rewrites left out are
    listed in <variant>_rewrite/rejects/rematch_surplus.jsonl; each data file is replaced whole."""
    tables = {v: pq.read_table(output / f"{v}_rewrite" / "data") for v in VARIANTS}
    result.tokens_before = {v: int(sum(t.column("n_tokens").to_pylist())) for v, t in tables.items()}
    smaller = min(result.tokens_before.values())
    if smaller == 0:
        result.rematch_note = "not re-matched: no rewrite was kept on one side"
        return
    budget = result.budget
    target = budget if budget is not None and smaller >= budget * (1 - tolerance / 2) else smaller
    # Rewrites in the order of their sources' draw, as the sets were: the re-match keeps the same sample.
    pools = {v: [Candidate(r["id"], r["n_tokens"], None) for r in t.select(["id", "n_tokens"]).to_pylist()]
             for v, t in tables.items()}
    for v in VARIANTS:
        ids = order[v] if order else pq.read_table(output / v / "data", columns=["id"]).column("id").to_pylist()
        position = {i: n for n, i in enumerate(ids)}
        pools[v].sort(key=lambda c: position.get(c.id, len(position)))
    try:
        ids_e, ids_m, report = match_pools(pools["enriched"], pools["minimized"], target, tolerance, length_bins,
                                           length_match="best")
    except CPTError as error:
        result.rematch_note = f"not re-matched: {error}"
        return
    for variant, ids in zip(VARIANTS, (ids_e, ids_m), strict=True):
        keep = set(ids)
        table = tables[variant]
        mask = pa.array([i in keep for i in table.column("id").to_pylist()])
        path = output / f"{variant}_rewrite" / "data" / "train-00000.parquet"
        surplus_path = output / f"{variant}_rewrite" / "rejects" / "rematch_surplus.jsonl"
        with atomic_open(surplus_path) as surplus, atomic_path(path) as staged:  # the data first, then its surplus
            pq.write_table(table.filter(mask), staged)
            surplus.writelines(json.dumps({"reason": "rematch_surplus: left out to match the other set's tokens", **row})
                               + "\n" for row in table.filter(pc.invert(mask)).select(["id", "n_tokens"]).to_pylist())
        result.kept[variant] = len(keep)
    result.tokens = {"enriched": report.enriched_tokens, "minimized": report.minimized_tokens}
    result.rematched, result.rematch_ks = True, report.ks_statistic
    if target == budget:
        result.rematch_note = f"re-matched at the budget, {target:,} tokens"
    else:
        short = min(VARIANTS, key=result.tokens_before.__getitem__)
        result.rematch_note = (f"re-matched at {target:,} tokens, the smaller rewritten total"
                               + (f": the {short} rewrites hold less than the budget {budget:,} after {result.rounds} "
                                  f"round(s) ({result.sources.get(short, {}).get('documents', 0):,} documents rewritten)"
                                  if budget is not None else ""))


# Rewrite rounds: the first rewrites each set and --rewrite-oversample more source tokens from its pool; each later
# round rewrites, from the rest of the pool, what the kept rewrites still lack at the rate observed so far.
REWRITE_ROUNDS = 4


def rewrite_sources(chosen: list[str], pool: list[Candidate], length_range: list[int] | None = None) -> list[Candidate]:
    """What a side may rewrite, in order: the set's documents (in draw order), then the rest of its pool in draw
    order (inside the common length range where the matching used one)."""
    ids = set(chosen)
    extra = [c for c in pool if c.id not in ids
             and (length_range is None or length_range[0] <= c.n_tokens <= length_range[1])]
    return [c for c in pool if c.id in ids] + extra


def _round_sources(sources: list[Candidate], taken: int, in_set: int, want_tokens: float) -> int:
    """How many of `sources` the next round takes in all: at least the set, then documents beyond it until they
    bring `want_tokens` more source tokens."""
    end, added = max(taken, in_set), 0
    while end < len(sources) and added < want_tokens:
        added += sources[end].n_tokens
        end += 1
    return end


def run_rewrite(output: Path, options: RewriteOptions, tokenizer_name: str, pool_files: list[str],
                sources: dict[str, list[Candidate]], in_set: dict[str, int], budget: int, oversample: float = 1.25,
                tolerance: float = 0.01, tasks: int = 1, workers: int = 1, progress: bool = True,
                executor: ExecutorOptions | None = None, overwrite: bool = False) -> RewriteResult:
    """Rewrites each side's `sources` (its set's `in_set` documents first, then more of its pool) into
    OUT/<variant>_rewrite, in rounds (REWRITE_ROUNDS at most), one model server per task, on `executor` (Slurm:
    raises JobSubmitted; rerun once the job is done). Round 0 takes the set plus `oversample - 1` times the budget in
    source tokens; a later round runs while a side's kept rewrites hold less than the budget plus half that margin,
    taking the source tokens they lack divided by the rewritten-to-source token rate seen so far. Each round is one
    LLM job (OUT/.curate/rewrite/round-N): the same configuration resumes, another is refused unless `overwrite`,
    which removes every round and rewrites again."""
    executor = executor or LOCAL
    options.validate(executor.gpus_per_task)
    if oversample < 1:
        raise CPTError("--rewrite-oversample must be at least 1")
    prompts = RewritePrompts.load()
    # Absolute: Ray and Slurm workers need not share this process's working directory.
    root = output.resolve() / STATE / "rewrite"
    if overwrite:
        shutil.rmtree(root, ignore_errors=True)
    # The pool is written anew by every run: what it holds, not its file times, decides whether earlier rewrites
    # and checkpoints still apply.
    pool_print = _content_fingerprint(pool_files)
    tokenizer = load_tokenizer(tokenizer_name)
    result = RewriteResult(prompt_version=prompts.version, budget=budget)
    taken = dict.fromkeys(VARIANTS, 0)
    goal, enough = budget * oversample, budget * (1 + (oversample - 1) / 2)
    started = time.perf_counter()
    files: list[str] = []
    for round_index in range(REWRITE_ROUNDS):
        ends = {}
        for v in VARIANTS:
            if round_index == 0:
                ends[v] = _round_sources(sources[v], 0, in_set[v], goal - sum(c.n_tokens for c in sources[v][:in_set[v]]))
                continue
            kept, rewritten = result.tokens.get(v, 0), sum(c.n_tokens for c in sources[v][:taken[v]])
            if kept >= enough or kept == 0:  # enough, or no rate to go by: nothing kept (the card says so)
                ends[v] = taken[v]
                continue
            ends[v] = _round_sources(sources[v], taken[v], in_set[v], (goal - kept) * rewritten / kept)
        if round_index and all(ends[v] == taken[v] for v in VARIANTS):
            break
        ids = {v: [c.id for c in sources[v][taken[v]:ends[v]]] for v in VARIANTS}
        files += _rewrite_round(root / f"round-{round_index}", ids, pool_files, pool_print, options, prompts, tasks,
                                workers, progress, executor)
        taken = ends
        result.rounds = round_index + 1
        for variant in VARIANTS:
            _write_rewrite(output / f"{variant}_rewrite", variant, files, tokenizer, options, prompts.version, result)
    result.seconds = time.perf_counter() - started
    result.sources = {v: {"documents": taken[v], "from_set": min(taken[v], in_set[v]),
                          "source_tokens": sum(c.n_tokens for c in sources[v][:taken[v]])} for v in VARIANTS}
    return result


def _rewrite_round(stage: Path, ids: dict[str, list[str]], pool_files: list[str], pool_print: list,
                   options: RewriteOptions, prompts: RewritePrompts, tasks: int, workers: int, progress: bool,
                   executor: ExecutorOptions) -> list[str]:
    """One rewrite job over the pool documents `ids` (variant -> ids); returns its finished output files."""
    digest = hashlib.md5(json.dumps(ids, sort_keys=True).encode()).hexdigest()
    config = {**asdict(options), "prompt_version": prompts.version, "inputs": {"pool": pool_print, "ids": digest}}
    claim_job(stage / "config.json", config, "rewrites", "pass --overwrite to rewrite again", run=[stage])
    source = stage / "input" / "documents.parquet"
    if not source.exists():
        source.parent.mkdir(parents=True, exist_ok=True)
        chosen = pa.table({"id": [i for v in VARIANTS for i in ids[v]], "variant": [v for v in VARIANTS for _ in ids[v]]})
        with duckdb.connect() as connection, atomic_path(source) as staged:
            connection.register("chosen", chosen)
            connection.execute(f"COPY (SELECT p.id, p.text, c.variant FROM read_parquet($f) p JOIN chosen c "
                               f"ON p.id = c.id AND p.pool = c.variant) TO '{staged}' (FORMAT parquet)",
                               {"f": pool_files})
    raw = stage / "raw"
    _run_llm_stage(stage, source, options, executor, tasks, workers, rollout_fn=rewrite_rollout,
                   writer=RewriteWriter(str(raw)), metadata_key=REWRITE_KEY, job_name="curate-cpt-rewrite", step="rewrite",
                   arguments={"prompts": prompts, "max_new_tokens": options.max_new_tokens}, progress=progress)
    return sorted(str(p) for p in raw.glob("rewrites_*.parquet"))


def _run_llm_stage(stage: Path, source: Path, options: DocumentJobOptions, executor: ExecutorOptions, tasks: int, workers: int, *,
                   rollout_fn, writer, arguments: dict, metadata_key: str, job_name: str, step: str,
                   progress: bool) -> None:
    """One LLM job of cpt (the rewrite, the is_solution judge) over the documents in `source`, into `stage`:
    InferenceRunner on the shared server config, rejects split off, checkpoints and logs in the stage; each rollout
    gets `arguments` (see _document_job_context)."""
    folder = LLMJobFolder(stage, hidden=False)
    run_llm_job(
        folder, [make_reader(InputSpec(str(source.parent))), SplitRejects(str(stage / "rejects"))],
        rollout_fn=rollout_fn, writer=writer, metadata_key=metadata_key, records_per_chunk=options.records_per_chunk,
        config=inference_config(options, folder.server_logs, executor.gpus_per_task,
                                context_tokens=options.context_tokens()),
        shared_context=partial(_document_job_context, step, options.tokenizer or options.model, options.max_doc_tokens,
                               progress, arguments),
        executor=executor, tasks=tasks, workers=workers, job_name=job_name, what=step)


def _content_fingerprint(folder: Path | list[str]) -> list:
    """Rows and a digest of every (id, text), in id order (a folder, or a list of parquet files)."""
    files = folder if isinstance(folder, list) else parquet_files(folder)
    with duckdb.connect() as connection:
        return list(connection.sql(
            "SELECT count(*), md5(coalesce(string_agg(md5(id || chr(0) || text), '' ORDER BY id), '')) "
            "FROM read_parquet($f)", params={"f": files}).fetchall()[0])


def _write_rewrite(destination: Path, variant: str, files: list[str], tokenizer, options: RewriteOptions,
                   prompt_version: str, result: RewriteResult) -> None:
    schema = pa.schema([("id", pa.string()), ("question", pa.string()), ("thoughts", pa.string()), ("answer", pa.string()),
                        ("completion", pa.string()), ("text", pa.string()), ("n_tokens", pa.int64()),
                        ("source_variant", pa.string()), ("model", pa.string()), ("prompt_version", pa.string()),
                        ("truncated_source", pa.bool_())])
    for folder in ("data", "rejects"):
        shutil.rmtree(destination / folder, ignore_errors=True)
        (destination / folder).mkdir(parents=True)
    data_path = destination / "data" / "train-00000.parquet"
    rejects_path = destination / "rejects" / "rewrite.jsonl"
    kept = tokens = 0
    dropped: dict[str, int] = {}
    with duckdb.connect() as connection:
        relation = connection.sql(
            "SELECT * FROM read_parquet($files) WHERE variant = $variant ORDER BY id", params={"files": files, "variant": variant}
        ) if files else None
        reader = relation.to_arrow_reader(1024) if relation is not None else []
        with atomic_open(rejects_path) as rejects, atomic_path(data_path) as staged, \
                pq.ParquetWriter(staged, schema) as writer:  # renamed when closed: the data first, then its rejects
            for batch in reader:
                rows = batch.to_pylist()
                good = [r for r in rows if r["error"] is None]
                for r in rows:
                    if r["error"] is not None:
                        reason = r["error"].split(" (")[0]
                        dropped[reason.split(":")[0]] = dropped.get(reason.split(":")[0], 0) + 1
                        rejects.write(json.dumps({"reason": r["error"], "id": r["id"], "variant": variant, "raw": r["raw"],
                                                  "finish_reason": r["finish_reason"]}, ensure_ascii=False) + "\n")
                texts = [cpt_text(r["question"], r["thoughts"], r["answer"]) for r in good]
                counts = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []
                table = pa.Table.from_pylist([
                    {"id": r["id"], "question": r["question"], "thoughts": r["thoughts"], "answer": r["answer"],
                     "completion": completion_text(r["thoughts"], r["answer"]), "text": text, "n_tokens": n,
                     "source_variant": variant, "model": options.model, "prompt_version": prompt_version,
                     "truncated_source": r["truncated"]}
                    for r, text, n in zip(good, texts, counts)], schema=schema)
                writer.write_table(table)
                kept += len(good)
                tokens += sum(counts)
    result.kept[variant], result.tokens[variant], result.dropped[variant] = kept, tokens, dropped


# --------------------------------------------------------------------------------------------- #
# Exports
# --------------------------------------------------------------------------------------------- #
@dataclass
class PackResult:
    output: Path
    format: str
    documents: int
    tokens: int
    sequences: int
    pack_length: int


def pack_dataset(dataset: Path, output: Path, tokenizer_name: str, pack_length: int = 4096, fmt: str = "parquet",
                 batch_size: int = 256) -> PackResult:
    """Tokenizes `text`, appends EOS to each document and concatenates everything into sequences of pack_length.

    parquet: data/train-00000.parquet, `input_ids` (pack_length ids; the last sequence may be shorter).
    memmap:  tokens.bin, a flat array of ids (reshape to (-1, pack_length) for full sequences).
    Both: index.parquet (id, start: offset of the document's first token in the flat stream, n_tokens incl. EOS)
    and meta.json (dtype, tokenizer, eos id, totals)."""
    if fmt not in ("parquet", "memmap"):
        raise CPTError("--pack-format must be parquet or memmap")
    if pack_length < 2:
        raise CPTError("--pack-length must be at least 2")
    tokenizer = load_tokenizer(tokenizer_name)
    eos = tokenizer.eos_token_id
    if eos is None:
        raise CPTError(f"the tokenizer {tokenizer_name!r} has no EOS token to separate packed documents")
    dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.uint32
    shutil.rmtree(output, ignore_errors=True)
    (output / "data").mkdir(parents=True)
    index_schema = pa.schema([("id", pa.string()), ("start", pa.int64()), ("n_tokens", pa.int64())])
    sequence_schema = pa.schema([("input_ids", pa.list_(pa.int32())), ("length", pa.int32())])
    index_path, flat_path = output / "index.parquet", output / "tokens.bin"
    data_path = output / "data" / "train-00000.parquet"
    buffer = np.empty(0, dtype=np.int64)
    offset = documents = sequences = 0

    def flush_sequences(writer, final: bool) -> None:
        nonlocal buffer, sequences
        full = len(buffer) // pack_length * pack_length
        end = len(buffer) if final else full
        if end:
            chunks = [buffer[i: i + pack_length] for i in range(0, end, pack_length)]
            writer.write_table(pa.table({"input_ids": [c.astype(np.int32) for c in chunks],
                                         "length": [len(c) for c in chunks]}, schema=sequence_schema))
            sequences += len(chunks)
            buffer = buffer[end:]

    # Each file renamed once it is closed: the sequences first, then the index, then meta.json.
    sink_path = data_path if fmt == "parquet" else flat_path
    with atomic_path(index_path) as index_staged, atomic_path(sink_path) as sink_staged, \
            pq.ParquetWriter(index_staged, index_schema) as index, \
            (pq.ParquetWriter(sink_staged, sequence_schema) if fmt == "parquet" else open(sink_staged, "wb")) as sink:
        for _, path in input_files(dataset):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=["id", "text"]):
                ids, texts = batch.column("id").to_pylist(), batch.column("text").to_pylist()
                encoded = [e + [eos] for e in tokenizer(texts, add_special_tokens=False)["input_ids"]]
                lengths = [len(e) for e in encoded]
                starts = offset + np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
                index.write_table(pa.table({"id": ids, "start": starts, "n_tokens": lengths}, schema=index_schema))
                flat = np.fromiter((t for e in encoded for t in e), dtype=np.int64, count=sum(lengths))
                offset += int(flat.size)
                documents += len(encoded)
                if fmt == "parquet":
                    buffer = np.concatenate([buffer, flat])
                    flush_sequences(sink, final=False)
                else:
                    sink.write(flat.astype(dtype).tobytes())
        if fmt == "parquet":
            flush_sequences(sink, final=True)
    if fmt == "memmap":
        sequences = math.ceil(offset / pack_length)
        shutil.rmtree(output / "data")
    meta = {"format": fmt, "pack_length": pack_length, "tokenizer": tokenizer_name, "eos_token_id": eos,
            "dtype": np.dtype(dtype).name if fmt == "memmap" else "int32", "documents": documents, "tokens": offset,
            "sequences": sequences, "source": str(dataset)}
    write_text_atomic(output / "meta.json", json.dumps(meta, indent=2))
    return PackResult(output=output, format=fmt, documents=documents, tokens=offset, sequences=sequences, pack_length=pack_length)


def load_packed_tokens(packed: Path) -> np.ndarray:
    """The flat token stream of a packed export (either format), for trainers and round-trip checks."""
    meta = json.loads((packed / "meta.json").read_text())
    if meta["format"] == "memmap":
        return np.memmap(packed / "tokens.bin", dtype=meta["dtype"], mode="r")
    table = pq.read_table(packed / "data", columns=["input_ids"])
    return np.concatenate([np.asarray(x, dtype=np.int64) for x in table.column("input_ids").to_pylist()]) \
        if table.num_rows else np.empty(0, dtype=np.int64)


def export_dataset(dataset: Path, exports: Path, tokenizer: str, pack_length: int, pack_format: str,
                   progress: bool = True) -> dict:
    """CPT text (parquet via the shared export module, plus jsonl), SFT where the rows have a completion, packing."""
    done: dict = {}
    cpt = run_export(dataset, "cpt", exports / "cpt", progress=progress)
    done["cpt"] = sum(cpt.rows.values())
    jsonl = exports / "cpt_jsonl" / "train-00000.jsonl"
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect() as connection, atomic_path(jsonl) as staged:
        connection.execute(f"COPY (SELECT text, id FROM read_parquet('{exports / 'cpt' / 'data'}/*.parquet')) "
                           f"TO '{staged}' (FORMAT json)")
    if "completion" in pq.read_schema(next(iter(sorted((dataset / "data").glob("*.parquet"))))).names:
        sft = run_export(dataset, "sft", exports / "sft", instruction="", progress=progress)
        done["sft"] = sum(sft.rows.values())
    packed = pack_dataset(dataset, exports / "packed", tokenizer, pack_length, pack_format)
    done["packed"] = {"sequences": packed.sequences, "tokens": packed.tokens, "format": packed.format}
    return done


# --------------------------------------------------------------------------------------------- #
# Cards
# --------------------------------------------------------------------------------------------- #
def _length_histogram(connection, files: list[str]) -> list[tuple[str, int, int]]:
    cases = " ".join(f"WHEN n_tokens < {hi} THEN '{lo}-{hi - 1}'" for lo, hi in itertools.pairwise(LENGTH_EDGES))
    order = " ".join(f"WHEN n_tokens < {hi} THEN {i}" for i, hi in enumerate(LENGTH_EDGES[1:]))
    return connection.sql(
        f"SELECT CASE {cases} ELSE '>={LENGTH_EDGES[-1]}' END AS bucket, count(*), sum(n_tokens) FROM read_parquet($f) "
        f"GROUP BY bucket, CASE {order} ELSE {len(LENGTH_EDGES)} END ORDER BY CASE {order} ELSE {len(LENGTH_EDGES)} END",
        params={"f": files}).fetchall()


def _plot_lengths(output: Path, datasets: dict[str, Path], tokenizer: str) -> str:
    with duckdb.connect() as connection:
        lengths = {name: [r[0] for r in connection.sql("SELECT n_tokens FROM read_parquet($f)",
                                                       params={"f": parquet_files(folder)}).fetchall()]
                   for name, folder in datasets.items() if parquet_files(folder)}
    return plot_length_histograms(lengths, output / "lengths.png",
                                  f"tokens per document ({Path(tokenizer).name})").name


@dataclass
class SolutionFilter:
    judge: str
    version: str
    kept: dict[str, int] = field(default_factory=dict)  # pool -> documents kept
    rejected_by: dict[str, dict[str, int]] = field(default_factory=dict)  # pool -> reason -> documents
    rejected: set[str] = field(default_factory=set)
    model: str | None = None  # the LLM judge's model

    def summary(self) -> dict:
        return {"judge": self.judge, "version": self.version, "model": self.model, "kept": self.kept,
                "rejected": self.rejected_by}


@dataclass(frozen=True)
class SolutionJudgeOptions(DocumentJobOptions):
    """--require-solution llm: the judge's own budget."""

    max_answer_tokens: int = 256  # room for a short reasoning before the JSON object

    def context_tokens(self) -> int:
        """One request: the document, the prompt (under 1024 tokens) and the answer."""
        return self.max_doc_tokens + self.max_answer_tokens + 1024


SOLUTION_KEY = "curate_solution"
SOLUTION_SCHEMA = pa.schema([
    ("id", pa.string()), ("pool", pa.string()), ("contain_problem", pa.bool_()), ("contain_solution", pa.bool_()),
    ("reason", pa.string()), ("raw", pa.string()), ("finish_reason", pa.string()), ("truncated", pa.bool_()),
])


async def solution_rollout(document, generate, prompt: SolutionPrompt, truncator, max_answer_tokens: int, bar) -> dict:
    """One document, one request, always one verdict row: a failed request or an unreadable answer is a verdict with
    an `error: ...` reason (the document is then rejected as unjudged), never a crash or a guess."""
    result, truncated, failure = await _ask_about_document(document, generate, truncator, prompt.messages,
                                                          max_answer_tokens)
    bar.advance()
    row = {"pool": document.metadata["pool"], "contain_problem": None, "contain_solution": None,
           "reason": None if failure is None else f"error: {failure}", "raw": None, "finish_reason": None,
           "truncated": truncated}
    if result is None:
        return row
    judgement = parse_solution_answer(result.text)
    return {**row, "contain_problem": judgement.contain_problem, "contain_solution": judgement.contain_solution,
            "reason": judgement.reason, "raw": result.text, "finish_reason": result.finish_reason}


class SolutionWriter(AtomicOutput, ParquetWriter):
    """One parquet file per checkpoint chunk, written as NAME.partial and renamed when the chunk closes."""

    name = "📒 is_solution verdicts"

    def __init__(self, output_folder: str):
        super().__init__(output_folder, output_filename="verdicts_${rank}_${chunk_index}.parquet", schema=SOLUTION_SCHEMA,
                         adapter=lambda _w, d: {**d.metadata[SOLUTION_KEY][0], "id": d.id},
                         use_content_defined_chunking=False, max_file_size=-1)


def run_solution_judge(pool_files: list[str], stage: Path, options: SolutionJudgeOptions, tasks: int = 1,
                       workers: int = 1, progress: bool = True, executor: ExecutorOptions | None = None,
                       overwrite: bool = False) -> tuple[dict[str, dict], str]:
    """Asks the model the is_solution question about every pool document, on `executor` (Slurm: raises JobSubmitted;
    rerun once the job is done), into `stage`; returns {id: verdict row} and the prompt version. The job's
    configuration (server, budgets, prompt version, the pool's content) decides whether an earlier run in `stage`
    resumes or is refused (`overwrite` starts over), as for the rewrite."""
    executor = executor or LOCAL
    options.validate(executor.gpus_per_task)
    prompt = SolutionPrompt.load()
    stage = stage.resolve()  # Ray and Slurm workers need not share this process's working directory
    source = stage / "input" / "documents.parquet"
    config = {**asdict(options), "prompt_version": prompt.version, "inputs": _content_fingerprint(pool_files)}
    claim_job(stage / "config.json", config, "is_solution verdicts", "pass --overwrite to judge again",
              overwrite=overwrite, run=[stage])
    if not source.exists():
        source.parent.mkdir(parents=True, exist_ok=True)
        with duckdb.connect() as connection, atomic_path(source) as staged:
            connection.execute(f"COPY (SELECT id, text, pool FROM read_parquet($f)) TO '{staged}' (FORMAT parquet)",
                               {"f": pool_files})
    raw = stage / "raw"
    _run_llm_stage(stage, source, options, executor, tasks, workers, rollout_fn=solution_rollout,
                   writer=SolutionWriter(str(raw)), metadata_key=SOLUTION_KEY, job_name="curate-cpt-is-solution",
                   step="is_solution", arguments={"prompt": prompt, "max_answer_tokens": options.max_answer_tokens},
                   progress=progress)
    files = sorted(str(p) for p in raw.glob("verdicts_*.parquet"))
    rows = pq.read_table(files, schema=SOLUTION_SCHEMA).to_pylist() if files else []
    return {r["id"]: r for r in rows}, prompt.version


def filter_solutions(pool_files: list[str], judge: str, rejects_path: Path, verdicts: dict[str, dict] | None = None,
                     version: str = CUE_VERSION, model: str | None = None, batch_size: int = 1024) -> SolutionFilter:
    """--require-solution: every pool document judged (problem and worked solution?), by the cue rule or from the
    LLM judge's `verdicts`; one reject line per document without both, with its reason (`no_problem`, `no_solution`,
    or `error: ...` for an answer that could not be read, with the raw answer) and the judge's version."""
    if judge not in JUDGES:
        raise CPTError(f"--solution-judge must be one of {', '.join(JUDGES)}, not {judge!r}")
    result = SolutionFilter(judge=judge, version=version, model=model)
    rejects_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(rejects_path) as rejects:
        for path in pool_files:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=["id", "pool", "text"]):
                for row in batch.to_pylist():
                    raw = None
                    if verdicts is None:
                        judgement = judge_by_cues(row["text"])
                    elif row["id"] in verdicts:
                        verdict = verdicts[row["id"]]
                        judgement = SolutionJudgement(verdict["contain_problem"], verdict["contain_solution"],
                                                      verdict["reason"])
                        raw = verdict["raw"]
                    else:  # only when the judge's output lost a row: rejected, and said so
                        judgement = SolutionJudgement(None, None, "error: no verdict from the judge")
                    if judgement.kept:
                        result.kept[row["pool"]] = result.kept.get(row["pool"], 0) + 1
                        continue
                    reasons = result.rejected_by.setdefault(row["pool"], {})
                    key = judgement.reason.split(":")[0]  # error: ... counted as `error`; the line keeps it whole
                    reasons[key] = reasons.get(key, 0) + 1
                    result.rejected.add(row["id"])
                    rejects.write(json.dumps({
                        "reason": f"{judgement.reason}: judged by {result.version}", "id": row["id"], "pool": row["pool"],
                        "contain_problem": judgement.contain_problem, "contain_solution": judgement.contain_solution,
                        **({"model": model, "raw": raw} if verdicts is not None else {}),
                    }, ensure_ascii=False) + "\n")
    return result


def length_removed(pools: dict, report: MatchReport) -> dict[str, int]:
    """Candidates each pool lost to the common length range: at selection (characters) plus at matching (tokens)."""
    return {v: int((pools.get("length_removed_chars") or {}).get(v, 0)) + int(report.length_removed.get(v, 0))
            for v in VARIANTS}


def _length_matching_row(parameters: dict, report: MatchReport) -> str:
    mode = parameters.get("length_match", "none")
    strata = (f"strata of enriched length quantiles {report.length_edges} x domain "
              f"(`{parameters.get('domain_column') or parameters.get('domain_key') or 'none'}`)")
    if mode == "none":
        return f"| length matching | `none`: {strata} |"
    if mode == "best":
        return (f"| length matching | `best`: both sets at the full budget, filled per length stratum (shared length "
                f"quantiles of both pools, {report.length_edges} tokens) to token targets as alike as both pools allow; "
                f"the two pools share {report.shared_tokens or 0:,} tokens stratum by stratum, the rest comes from the "
                f"strata nearest the other set's (KS of the targets {report.target_ks or 0:.4f}); minimized strata follow "
                f"the enriched domain mix (`{parameters.get('domain_column') or parameters.get('domain_key') or 'none'}`) |")
    chars = parameters["pools"].get("length_range_chars")
    removed = parameters.get("length_removed") or {}
    text = (f"| length matching | `{mode}`: both pools cut to their common length range "
            f"({chars[0]:,}-{chars[1]:,} characters, each pool's {parameters['length_trim']:g}-"
            f"{1 - parameters['length_trim']:g} quantiles intersected; " if chars else f"| length matching | `{mode}`: (")
    text += (f"then {report.length_range[0]:,}-{report.length_range[1]:,} tokens), "
             if report.length_range else "no token range), ")
    text += f"{removed.get('enriched', 0):,} enriched and {removed.get('minimized', 0):,} minimized candidates removed; "
    if mode == "strict" and report.length_weights:
        text += "both sets filled to the per-bin token shares both pools can supply " \
                f"({', '.join(f'{w:.2f}' for w in report.length_weights)}); "
    return text + strata + " |"


def cpt_command(parameters: dict, spec: InputSpec, output: Path, rewrite: RewriteOptions | None,
                solution_judge: SolutionJudgeOptions | None = None) -> str:
    """`curate cpt` with every option this build used (tags by absolute path, as the card records them)."""
    selection = parameters["selection"]
    options = [
        ("--tags", parameters["tags"]), ("--texts", spec.path), ("--tokens", parameters["budget"]),
        ("--tokenizer", parameters["tokenizer"]), ("--output", output), ("--behaviors", ",".join(selection["behaviors"])),
        ("--min-behaviors", selection["min_behaviors"]), ("--min-count", selection["min_count"]),
        ("--seed", selection["seed"]), ("--tolerance", parameters["tolerance"]),
        ("--length-bins", parameters["length_bins"]), ("--length-match", parameters["length_match"]),
        ("--length-trim", parameters["length_trim"]), ("--oversample", parameters["oversample"]),
        ("--text-key", spec.text_key), ("--id-key", spec.id_key), ("--pack-length", parameters["pack_length"]),
        ("--pack-format", parameters["pack_format"]), ("--license", parameters["license"]),
        ("--require-solution", bool(parameters.get("require_solution"))),
        ("--solution-judge", parameters.get("require_solution") or None),
        ("--split", spec.split if spec.is_hub else None), ("--domain-key", parameters["domain_key"] or None),
    ]
    if rewrite is not None:
        options += [("--rewrite", True), ("--model", rewrite.model), ("--backend", rewrite.backend),
                    ("--max-doc-tokens", rewrite.max_doc_tokens), ("--max-new-tokens", rewrite.max_new_tokens),
                    ("--rewrite-oversample", parameters["rewrite_oversample"]),
                    ("--endpoint-url", rewrite.endpoint_url or None)]
    elif solution_judge is not None:  # the judge's server, when no rewrite names it
        options += [("--model", solution_judge.model), ("--backend", solution_judge.backend),
                    ("--max-doc-tokens", solution_judge.max_doc_tokens),
                    ("--endpoint-url", solution_judge.endpoint_url or None)]
    return reproduce_command("cpt", options=options, dedup=parameters["dedup"], decontam=parameters["decontam"],
                             benchmarks_dir=parameters["benchmarks_dir"])


CPT_FIELDS = [
    ("`id`", "string", "document id in the corpus"),
    ("`text`", "string", "the document, unchanged"),
    ("`n_tokens`", "int64", "tokens of `text` under the named tokenizer, no special tokens"),
    ("`n_chars`", "int64", "characters of `text`"),
    ("`domain`", "string, nullable", "the stratum the length matching balanced on (null without a domain key)"),
    ("`verification`, `backtracking`, `subgoal_setting`, `backward_chaining`", "int32",
     "how many sentences the classifier found showing each behavior"),
    ("`classifier`, `model`, `prompt_version`", "string", "what produced the counts (model and prompt: LLM classifiers)"),
    ("`error`", "string", "always null here: documents the classifier could not label are in neither set"),
]
REWRITE_FIELDS = [
    ("`id`", "string", "the source document's id"),
    ("`question`, `thoughts`, `answer`", "string", "the three parts of the rewrite"),
    ("`completion`", "string", "`thoughts` and `answer` in the SFT completion format"),
    ("`text`", "string", "question, thoughts and answer as one CPT document"),
    ("`n_tokens`", "int64", "tokens of `text` under the named tokenizer"),
    ("`source_variant`", "string", "`enriched` or `minimized`"),
    ("`model`, `prompt_version`", "string", "who rewrote it, with which prompts"),
    ("`truncated_source`", "bool", "the source was cut to the model's document budget before rewriting"),
]
CPT_LOAD = 'from datasets import load_dataset\nds = load_dataset("parquet", data_files={"train": "data/train-*.parquet"})'


def _matching_table(parameters: dict, report: MatchReport) -> str:
    pools = parameters["pools"]
    short = report.strata_short
    return "\n".join([
        "| measure | value |", "|---|---|",
        _length_matching_row(parameters, report),
        f"| two-sample KS statistic (token lengths, enriched vs minimized) | {report.ks_statistic:.4f} |",
        (f"| domain x length strata the minimized pool could not fill (filled from the same length bin) | "
         f"{len(short)} of {report.strata}{': ' + ', '.join(short[:8]) if short else ''}{' ...' if len(short) > 8 else ''} |"),
        (f"| candidates (enriched / minimized / neither / ambiguous ids) | {pools.get('enriched', 0):,} / "
         f"{pools.get('minimized', 0):,} / {pools.get('neither', 0):,} / {pools.get('ambiguous_ids', 0):,} |"),
        (f"| enriched / minimized | {report.enriched_documents:,} documents, {report.enriched_tokens:,} tokens / "
         f"{report.minimized_documents:,} documents, {report.minimized_tokens:,} tokens |"),
        *([(f"| --require-solution ({parameters['solutions']['judge']}: `{parameters['solutions']['version']}`"
            + (f", `{parameters['solutions']['model']}`" if parameters["solutions"].get("model") else "")
            + "): documents kept / rejected per pool | "
            + " / ".join(f"{v} {parameters['solutions']['kept'].get(v, 0):,} kept, "
                         + (", ".join(f"{n:,} {r}" for r, n in parameters["solutions"]["rejected"].get(v, {}).items())
                            or "0 rejected") for v in VARIANTS) + " |")]
          if parameters.get("solutions") else []),
        *([(f"| share of each pool used (tokens of the set / tokens of the candidates matched from) | enriched "
            f"{100 * report.pool_used['enriched']:.1f} % of {report.pool_tokens['enriched']:,} tokens "
            f"({report.pool_documents['enriched']:,} documents) / minimized {100 * report.pool_used['minimized']:.1f} % "
            f"of {report.pool_tokens['minimized']:,} tokens ({report.pool_documents['minimized']:,} documents) |")]
          if report.pool_used else []),
    ])


def length_histogram_table(report: MatchReport) -> str:
    """Documents per length bucket in both candidate pools and both sets: where the sets follow the pools and where
    the matching had to leave them."""
    columns = ("enriched_pool", "enriched", "minimized_pool", "minimized")
    if not all(c in report.length_histogram for c in columns):
        return "(not recorded)"
    labels = [f"{lo}-{hi - 1}" for lo, hi in itertools.pairwise(LENGTH_EDGES)] + [f">={LENGTH_EDGES[-1]}"]
    rows = [f"| {label} | " + " | ".join(f"{report.length_histogram[c][i]:,}" for c in columns) + " |"
            for i, label in enumerate(labels) if any(report.length_histogram[c][i] for c in columns)]
    return ("Documents per token-length bucket:\n\n| tokens per document | enriched pool | enriched set | minimized pool | "
            "minimized set |\n|---|---|---|---|---|\n" + "\n".join(rows))


def write_cpt_card(output: Path, variant: str, parameters: dict, report: MatchReport, tags: Path,
                   rejects: dict[str, int]) -> None:
    from huggingface_hub import DatasetCardData


    data = output / "data"
    files = parquet_files(data)
    selection = parameters["selection"]
    with duckdb.connect() as connection:
        documents, tokens, characters = connection.sql(
            "SELECT count(*), coalesce(sum(n_tokens), 0), coalesce(sum(n_chars), 0) FROM read_parquet($f)", params={"f": files}
        ).fetchall()[0]
        histogram = _length_histogram(connection, files)
        domains = connection.sql("SELECT coalesce(domain, '-'), count(*), sum(n_tokens) FROM read_parquet($f) GROUP BY 1 "
                                 "ORDER BY 3 DESC", params={"f": files}).fetchall()
    plot = _plot_lengths(output, {v: output.parent / v / "data" for v in VARIANTS}, parameters["tokenizer"])
    rule = (f"at least {selection['min_behaviors']} of {', '.join(selection['behaviors'])}, each counted at least "
            f"{selection['min_count']} time(s)" if variant == "enriched" else f"none of {', '.join(selection['behaviors'])}")
    card_data = DatasetCardData(
        license=parameters["license"], language=["en"], task_categories=["text-generation"],
        size_categories=[size_category(documents)], pretty_name=f"curate CPT: behavior-{variant}",
        tags=["reasoning", "cognitive-behaviors", "curate", "continued-pretraining", variant],
        configs=split_configs(["train"]),
    )
    partner = "minimized" if variant == "enriched" else "enriched"
    partner_tokens = report.minimized_tokens if variant == "enriched" else report.enriched_tokens
    card = render_card(
        card_data,
        summary=f"{documents:,} documents, {tokens:,} tokens ({Path(parameters['tokenizer']).name} tokenizer, no special "
                f"tokens), {characters:,} characters: documents with {rule}. The matched `{partner}` set has "
                f"{partner_tokens:,} tokens.",
        method=f"Documents tagged by `{parameters['classifier']}` were split by a DuckDB query into behavior-enriched and "
               "behavior-minimized candidate pools (seeded random order, no id in both), counted in tokens, and drawn "
               "into two sets at one token budget with matched length distributions.",
        parameters=[("corpus", parameters["texts"]), ("text key", parameters["text_key"]), ("tags", parameters["tags"]),
                    ("classifier", parameters["classifier"]), ("rule", selection[f"{variant}_rule"]),
                    ("seed", f"{selection['seed']} (documents drawn in md5(id:seed) order, not corpus order)"),
                    ("token budget", f"{report.budget:,} (tolerance {100 * report.tolerance:g} %)"),
                    ("tokenizer", parameters["tokenizer"]), ("length match", parameters["length_match"]),
                    ("length trim", parameters["length_trim"]), ("length bins", parameters["length_bins"]),
                    ("domain key", parameters["domain_key"]), ("oversample", parameters["oversample"]),
                    ("dedup / decontam", f"{parameters['dedup']} / {parameters['decontam'] or 'no'}")],
        command=parameters["command"],
        sections=[
            ("Matching", _matching_table(parameters, report)),
            ("Length histograms, pools and sets", length_histogram_table(report)),
            ("Length distribution", "| tokens per document | documents | tokens |\n|---|---|---|\n"
             + "\n".join(f"| {b} | {n:,} | {t:,} |" for b, n, t in histogram)),
            ("Domain mix", "| domain | documents | tokens |\n|---|---|---|\n"
             + "\n".join(f"| {d} | {n:,} | {t:,} |" for d, n, t in domains)),
            ("Behavior prevalence", (f"After selection:\n\n{stats_table(behavior_stats(data))}\n\n"
             f"Before selection (all tagged documents):\n\n{stats_table(behavior_stats(tags))}")),
            ("Rejected records", rejects_table(rejects)),
        ],
        plots=[("token lengths of both sets", plot)],
        fields=CPT_FIELDS,
        load=CPT_LOAD,
        limitations="Counts come from an automatic classifier and carry its errors. Length matching is by strata, so the "
                    "two distributions agree up to the KS statistic above, not exactly. With `best` (the default), "
                    "where the two pools share too little length mass for the budget the sets differ in length by up to "
                    "that KS statistic; it is reported, not hidden. With `strict` or `range` length "
                    "matching, documents outside the two pools' common length range (counted above) are in neither set: "
                    "the enriched set then under-represents the longest behavior-rich documents, by design, so that "
                    "length does not confound the comparison.",
    )
    save_card(card, output)


def _rematch_table(result: RewriteResult, parameters: dict) -> str:
    matched = parameters.get("matched_tokens") or {}
    rows = []
    for v in VARIANTS:
        source = result.sources.get(v, {})
        rows.append(f"| {v} | {matched.get(v, 0):,} | {source.get('documents', 0):,} ({source.get('from_set', 0):,} from the "
                    f"set, {source.get('documents', 0) - source.get('from_set', 0):,} more of its pool), "
                    f"{source.get('source_tokens', 0):,} tokens | {result.tokens_before.get(v, 0):,} | "
                    f"{result.tokens.get(v, 0):,} |")
    return (f"{result.rematch_note or 'not re-matched'}"
            + (f"; length KS after the re-match {result.rematch_ks:.4f}" if result.rematch_ks is not None else "")
            + f". Rewritten in {result.rounds} round(s), the first with --rewrite-oversample "
              f"{parameters.get('rewrite_oversample')} times the budget in source tokens."
            + f"\n\n| set | source set tokens (budget {parameters['budget']:,}) | documents rewritten | "
              "all kept rewrites | after the re-match |\n|---|---|---|---|---|\n" + "\n".join(rows))


def write_rewrite_card(output: Path, variant: str, result: RewriteResult, options: RewriteOptions, parameters: dict) -> None:
    from huggingface_hub import DatasetCardData


    kept, dropped = result.kept[variant], result.dropped[variant]
    card_data = DatasetCardData(
        license=parameters["license"], language=["en"], task_categories=["text-generation"],
        size_categories=[size_category(kept)], pretty_name=f"curate CPT: {variant}, rewritten as question / thoughts / answer",
        tags=["reasoning", "curate", "continued-pretraining", variant, "rewrite"], configs=split_configs(["train"]),
    )
    style = ("first-person thoughts that keep the author's checks, dead ends and subgoals" if variant == "enriched"
             else "plain numbered steps")
    card = render_card(
        card_data,
        summary=f"{kept:,} documents of `../{variant}`'s pool rewritten as question / thoughts / answer, "
                f"{result.tokens[variant]:,} tokens of `text` ({Path(parameters['tokenizer']).name} tokenizer).",
        method=f"Each document was rewritten by `{options.model}` ({options.backend}) with prompt `{result.prompt_version}` "
               f"(thoughts: {style}) at temperature 0; every row keeps its source `id`.",
        parameters=[("model", options.model), ("backend", options.backend), ("prompt version", result.prompt_version),
                    ("max doc tokens", options.max_doc_tokens), ("max new tokens", options.max_new_tokens),
                    ("tokenizer", parameters["tokenizer"]), ("source", f"../{variant}")],
        command=parameters["command"],
        sections=[("Dropped rewrites", f"{sum(dropped.values()):,} dropped (kept with the raw model output in "
                   "`rejects/rewrite.jsonl`):\n\n| reason | rows |\n|---|---|\n"
                   + ("\n".join(f"| {k} | {v:,} |" for k, v in dropped.items()) or "| (none) | 0 |")),
                  ("Token budgets before and after the re-match", _rematch_table(result, parameters))],
        fields=REWRITE_FIELDS,
        load=CPT_LOAD,
        limitations=f"Documents were cut to {options.max_doc_tokens:,} model tokens at a line break before rewriting, and "
                    f"generation was limited to {options.max_new_tokens:,} tokens. Token totals of the two rewritten sets "
                    "are re-matched at the budget where both sides kept rewrites enough (see above; rewrites of more "
                    "documents of the same pool than the set held make up for rewrites shorter than their sources, so a "
                    "rewritten set is not the rewrite of exactly its source set), and below it where the pool ran out. The "
                    "rewriting model may drop or invent steps; nothing checks the rewrite against its source beyond its form.",
    )
    save_card(card, output)


# --------------------------------------------------------------------------------------------- #
# The job
# --------------------------------------------------------------------------------------------- #
@dataclass
class CPTResult:
    output: Path
    report: MatchReport
    pools: dict
    rewrite: RewriteResult | None = None
    exports: dict = field(default_factory=dict)
    rejects: dict = field(default_factory=dict)


def run_cpt(
    tags: str | Path,
    spec: InputSpec,
    tokens: int | str,
    tokenizer: str,
    output: str | Path,
    selection: CPTSelection | None = None,
    tolerance: float = 0.01,
    length_bins: int = 10,
    domain_key: str | None = None,
    oversample: float = 2.0,
    length_match: str = "best",
    length_trim: float = 0.025,
    dedup: bool = False,
    decontam: str | None = None,
    benchmarks_dir: str | Path | None = None,
    rewrite: RewriteOptions | None = None,
    rewrite_oversample: float = 1.25,
    require_solution: str | None = None,
    solution_judge: SolutionJudgeOptions | None = None,
    pack_length: int = 4096,
    pack_format: str = "parquet",
    export: bool = True,
    tasks: int = 1,
    workers: int = 1,
    progress: bool = True,
    license: str = "other",
    executor: ExecutorOptions | None = None,
    overwrite: bool = False,
) -> CPTResult:
    """Builds both sets. On Slurm the corpus pass (and, with `rewrite`, the rewrite) is submitted and JobSubmitted
    is raised; the same call once the job is done continues from the finished job."""
    selection = selection or CPTSelection()
    budget = parse_token_count(tokens)
    output, tags = Path(output), Path(tags)
    load_tokenizer(tokenizer)  # a wrong path fails here, not inside a worker
    if oversample < 1:
        raise CPTError("--oversample must be at least 1")
    length_match = length_match_mode(length_match)
    if require_solution not in (None, *JUDGES):
        raise CPTError(f"--solution-judge must be one of {', '.join(JUDGES)}, not {require_solution!r}")
    if require_solution == "llm" and solution_judge is None:
        raise CPTError("--solution-judge llm needs --model (and --backend) for the judge's server")
    if solution_judge is not None and require_solution != "llm":
        raise CPTError("judge server options apply to --require-solution --solution-judge llm only")
    if not 0 <= length_trim < 0.5:
        raise CPTError("--length-trim must be at least 0 and below 0.5")
    state = output / STATE
    state.mkdir(parents=True, exist_ok=True)
    cleaned = state / "pool_clean"
    for old in [*(output / v for v in VARIANTS), output / "rejects", output / "exports", cleaned]:
        shutil.rmtree(old, ignore_errors=True)

    # Absolute: Ray and Slurm workers need not share this process's working directory.
    pool_dir = state.resolve() / "pool"
    trim = length_trim if length_match in ("strict", "range") else None
    files = tag_files(tags)
    tag_rejects = tags / "rejects"
    resumed = resumable_stage(pool_dir, {
        "tags": [[f, Path(f).stat().st_size, Path(f).stat().st_mtime_ns] for f in files],
        "tag_rejects": input_signature(InputSpec(str(tag_rejects))) if tag_rejects.is_dir() else None,
        "texts": input_signature(spec), "text_key": spec.text_key, "id_key": spec.id_key,
        "selection": selection.describe(), "budget": budget, "oversample": oversample, "domain_key": domain_key,
        "length_trim": trim, "tokenizer": tokenizer, "tasks": tasks,
    })
    pools_path, pools_summary = pool_dir / "pools.parquet", pool_dir / "pools.json"
    kept_copies_path = pool_dir / "kept_copies.parquet"
    if not (resumed and pools_summary.exists()):
        # The quantile trim is applied once, on characters over every candidate; the token stage below only clips
        # both pools to their exact common token range (trim 0), so the tails are not trimmed twice.
        counts = select_pools(tags, selection, int(budget * MAX_CHARS_PER_TOKEN * oversample), pools_path, domain_key, trim)
        write_kept_copies(files, tag_rejects, kept_copies_path)
        write_text_atomic(pools_summary, json.dumps(counts))
    pools = json.loads(pools_summary.read_text())  # read back in either case: a rerun sees the same types
    run_stages([Stage("curate-cpt-pool", [
        make_reader(spec, progress=progress), KeepFirstCopy(str(kept_copies_path)), SplitRejects(str(pool_dir / "rejects")),
        KeepSelected(str(pools_path)), CountTokens(tokenizer, domain_key), PoolWriter(str(pool_dir / "data")),
    ], tasks, pool_dir / "logs")], replace(executor or LOCAL, gpus_per_task=0), workers)  # counting needs no GPU
    if not parquet_files(pool_dir / "data"):
        raise CPTError(f"none of the {sum(pools['read_into_pool'].values()):,} candidate ids were found in {spec.path}; "
                       "are the tags from this corpus (and --id-key right)?")
    (output / "rejects").mkdir(parents=True, exist_ok=True)
    for unreadable in sorted((pool_dir / "rejects").glob("*.jsonl")):
        # A copy, not a move: the pool stays whole for the next rerun. Through a partial, so a crash mid-copy leaves
        # no rejects file that looks finished.
        with atomic_path(output / "rejects" / unreadable.name) as copy:
            shutil.copyfile(unreadable, copy)
    # Cleaned into a folder of their own: the pool stays as the corpus pass wrote it, for the next rerun.
    pool = pool_dir
    if dedup:
        dedup_pool(pool, cleaned, text_key="text", tasks=tasks, workers=workers, progress=progress)
        pool = cleaned
    if decontam:
        decontaminate(pool, cleaned, decontam, fields=["text"], benchmarks_dir=benchmarks_dir, tasks=tasks,
                      workers=workers, progress=progress)
        pool = cleaned
    for moved in sorted((cleaned / "rejects").glob("*.jsonl")) if (cleaned / "rejects").is_dir() else []:
        shutil.move(str(moved), output / "rejects" / moved.name)

    pool_files = parquet_files(pool / "data")
    with duckdb.connect() as connection:
        rows = connection.sql("SELECT id, pool, n_tokens, domain FROM read_parquet($f) ORDER BY draw",
                              params={"f": pool_files}).fetchall()
    solutions = None
    if require_solution == "llm":
        verdicts, version = run_solution_judge(pool_files, state / "solution", solution_judge, tasks=tasks,
                                               workers=workers, progress=progress, executor=executor, overwrite=overwrite)
        solutions = filter_solutions(pool_files, "llm", output / "rejects" / "require_solution.jsonl", verdicts,
                                     version, solution_judge.model)
    elif require_solution:
        solutions = filter_solutions(pool_files, require_solution, output / "rejects" / "require_solution.jsonl")
    if solutions is not None:
        rows = [r for r in rows if r[0] not in solutions.rejected]
    candidates = {v: [Candidate(i, n, d) for i, p, n, d in rows if p == v] for v in VARIANTS}
    try:
        ids_e, ids_m, report = match_pools(candidates["enriched"], candidates["minimized"], budget, tolerance,
                                           length_bins, length_match=length_match, length_trim=0.0,
                                           removed_before=pools.get("length_removed_chars"))
    except CPTError as error:
        if solutions is None:
            raise
        rejected = {v: sum(solutions.rejected_by.get(v, {}).values()) for v in VARIANTS}
        raise CPTError(f"{error} (after --require-solution by {solutions.version}: enriched {solutions.kept.get('enriched', 0):,} "
                       f"kept / {rejected['enriched']:,} rejected, minimized {solutions.kept.get('minimized', 0):,} kept / "
                       f"{rejected['minimized']:,} rejected; reasons in {output / 'rejects' / 'require_solution.jsonl'})") from None
    if set(ids_e) & set(ids_m):
        raise AssertionError("a document was selected into both sets")  # excluded by construction; never write such a pair

    parameters = {
        "tags": str(tags.resolve()), "classifier": pools["classifier"], "texts": spec.path, "text_key": spec.text_key,
        "tokenizer": tokenizer, "selection": selection.describe(), "budget": budget, "tolerance": tolerance,
        "length_bins": length_bins, "domain_key": domain_key, "domain_column": pools["domain_column"],
        "oversample": oversample, "length_match": length_match, "length_trim": length_trim,
        "length_removed": length_removed(pools, report), "dedup": dedup, "decontam": decontam,
        "benchmarks_dir": str(benchmarks_dir) if benchmarks_dir else None, "pools": pools, "license": license,
        "pack_length": pack_length, "pack_format": pack_format, "require_solution": require_solution,
        "rewrite_oversample": rewrite_oversample if rewrite is not None else None,
        "solutions": solutions.summary() if solutions else None,
    }
    parameters["command"] = cpt_command(parameters, spec, output, rewrite, solution_judge)
    parameters["matched_tokens"] = {"enriched": report.enriched_tokens, "minimized": report.minimized_tokens}
    with duckdb.connect() as connection:
        for variant, ids in zip(VARIANTS, (ids_e, ids_m)):
            destination = output / variant / "data" / "train-00000.parquet"
            destination.parent.mkdir(parents=True)
            connection.register("chosen", pa.table({"id": ids}))
            with atomic_path(destination) as staged:
                connection.execute(
                    f"COPY (SELECT p.* EXCLUDE (pool, draw), NULL::VARCHAR AS error FROM read_parquet($f) p "
                    f"JOIN chosen USING (id) ORDER BY p.draw) TO '{staged}' (FORMAT parquet)", {"f": pool_files})
            connection.unregister("chosen")
    rejects = count_rejects(output / "rejects")
    for variant in VARIANTS:
        write_cpt_card(output / variant, variant, parameters, report, tags, rejects)
    result = CPTResult(output=output, report=report, pools=pools, rejects=rejects)

    datasets = list(VARIANTS)
    if rewrite is not None:
        # Rewrites change lengths, not by the same factor on both sides: each side rewrites its set plus more of its
        # pool, so that both rewritten sets can be matched at the budget again.
        sources = {v: rewrite_sources(ids, candidates[v], report.length_range)
                   for v, ids in zip(VARIANTS, (ids_e, ids_m), strict=True)}
        result.rewrite = run_rewrite(output, rewrite, tokenizer, pool_files, sources,
                                     {"enriched": len(ids_e), "minimized": len(ids_m)}, budget,
                                     oversample=rewrite_oversample, tolerance=tolerance, tasks=tasks, workers=workers,
                                     progress=progress, executor=executor, overwrite=overwrite)
        rematch_rewrites(output, result.rewrite, tolerance, length_bins,
                         order={v: [c.id for c in sources[v]] for v in VARIANTS})
        for variant in VARIANTS:
            write_rewrite_card(output / f"{variant}_rewrite", variant, result.rewrite, rewrite, parameters)
        datasets += [f"{v}_rewrite" for v in VARIANTS]
    if export:
        for name in datasets:
            if parquet_files(output / name / "data"):
                result.exports[name] = export_dataset(output / name, output / "exports" / name, tokenizer, pack_length,
                                                      pack_format, progress)
    summary = {"parameters": parameters, "match": asdict(report), "rejects": rejects, "exports": result.exports,
               "rewrite": asdict(result.rewrite) if result.rewrite else None}
    write_text_atomic(state / "cpt.json", json.dumps(summary, indent=2, default=str))
    return result


def cpt_options(job: CPTJob) -> tuple[CPTSelection, RewriteOptions | None, SolutionJudgeOptions | None]:
    """The job's selection and the options of its LLM jobs (the rewrite, the solution judge), each option checked:
    a wrong one fails here, in one line, before the output is claimed (the cpt flow checks its parameters with it)."""
    chosen = parse_behavior_list(job.behaviors)
    if not chosen:
        raise UnknownBehaviorError("--behaviors is empty")
    selection = CPTSelection(behaviors=chosen, min_behaviors=job.min_behaviors, min_count=job.min_count, seed=job.seed)
    parse_token_count(job.tokens)
    length_match_mode(job.length_match)
    if job.pack_format not in ("parquet", "memmap"):
        raise CPTError(f"--pack-format must be parquet or memmap, not {job.pack_format!r}")
    if job.rewrite and not job.model:
        raise CPTError("--rewrite needs --model")
    server = {"model": job.model, "backend": job.backend, "endpoint_url": job.endpoint_url,
              "max_doc_tokens": job.max_doc_tokens, "tp": job.tp, "dp": job.dp, "concurrency": job.concurrency,
              **server_start(job)}
    rewrite = RewriteOptions(**server, max_new_tokens=job.max_new_tokens) if job.rewrite else None
    if job.solution_judge not in JUDGES:
        raise CPTError(f"--solution-judge must be cues or llm, not {job.solution_judge!r}")
    judge_llm = job.require_solution and job.solution_judge == "llm"
    if judge_llm and not job.model:
        raise CPTError("--solution-judge llm needs --model")
    judge = SolutionJudgeOptions(**server) if judge_llm else None
    if job.gpus_per_task and not (job.rewrite or judge_llm):
        raise CPTError("--gpus-per-task applies to --rewrite and --solution-judge llm only")
    if job.executor.gpus_per_task not in (0, job.gpus_per_task):
        raise CPTError("the GPUs per task are the job's gpus_per_task (the LLM jobs' servers), not the executor's")
    tag_files(job.tags)  # a folder without attribute shards
    return selection, rewrite, judge


def cpt(job: CPTJob, progress: bool = True, refresh: bool = False) -> CPTResult | None:
    """Runs `curate cpt` and the cpt flow: claims the output for `job.record()` and the tags and corpus files (a
    folder holding another dataset is refused unless `job.overwrite`), then builds both sets. None when the output is
    up to date; `refresh` builds it all the same (a flow whose cached result is stale). An unfinished run (a Slurm
    stage submitted, an interrupt) keeps its claim: the same job continues it."""
    selection, rewrite, judge = cpt_options(job)
    inputs = {"tags": folder_signature(job.tags), "texts": file_fingerprints(job.corpus)}
    return write_once(job.output, "cpt", job.record(), lambda: run_cpt(
        job.tags, job.corpus, job.tokens, job.tokenizer, job.output, selection, tolerance=job.tolerance,
        length_bins=job.length_bins, domain_key=job.domain_key, oversample=job.oversample,
        length_match=job.length_match, length_trim=job.length_trim, rewrite=rewrite,
        rewrite_oversample=job.rewrite_oversample,
        require_solution=job.solution_judge if job.require_solution else None, solution_judge=judge,
        pack_length=job.pack_length, pack_format=job.pack_format, export=job.export,
        tasks=job.executor.tasks, workers=job.executor.workers, progress=progress, license=job.license,
        executor=job.runs_on, overwrite=job.overwrite, **job.cleaning.arguments()),
        inputs=inputs, overwrite=job.overwrite, refresh=refresh)
