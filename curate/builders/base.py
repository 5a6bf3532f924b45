"""The loop every dataset builder runs: each input item is decided once, kept as rows or rejected with a reason.

As datatrove's `BaseFilter` owns its loop and a filter only says keep or drop, a `Builder` owns the iteration and a
subclass only decides (`decide`, or `decide_batch` where items are decided together, as a classifier or an LLM job
reads a whole batch). What is decided goes to a `BuildOutput`: kept rows to the data parquet files (one per split),
rejects to one JSON-lines file, both written under a PARTIAL name (`curate.files`) and renamed only when the run
ends, with the counts the card and stats.json report (kept and rejected per source and per reason) and the one
progress bar.

They are two pieces, not one class, because the output outlives or feeds the loop: mcqa revises its kept rows with
an LLM before the files appear (`BuildOutput.revise`), priming draws its next problems from the rows each split
still lacks, and multihop runs one loop over its source problems (rejects written, the pool held in memory), searches
for chains, then a second loop that writes the chains' rows.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import pyarrow as pa
import pyarrow.parquet as pq

from curate.console import ProgressBar
from curate.files import atomic_open, atomic_open_kept, atomic_path
from curate.pipelines.steps import batched

TRAIN = "train"


@dataclass(frozen=True)
class Keep:
    """An item kept: its rows, each with the split (data file) it goes to."""

    rows: tuple[tuple[str, Any], ...]
    source: str = ""

    @classmethod
    def row(cls, row: Any, split: str = TRAIN, source: str = "") -> Keep:
        return cls(((split, row),), source)


@dataclass(frozen=True)
class Reject:
    """An item refused. REASON is what it is counted under (a short code such as `missing_options`); RECORD is its
    line in the rejects file, in the builder's own fields (its id, the full reason, whatever explains it)."""

    reason: str
    record: dict
    source: str = ""


Decision = Keep | Reject


class Builder:
    """The read loop: items in, one decision each, every decision to the output. A subclass overrides `decide`
    (one item) or `decide_batch` (items decided together, in batches of `batch_size`); `batches` is where a builder
    that draws its own items (priming) forms them, `decisions` where they come from elsewhere (mcqa's process pool)."""

    batch_size = 1

    def __init_subclass__(cls, **kwargs):
        # A builder that decides nothing is a mistake in its class, so it fails where the class is written, not
        # half-way through a run.
        super().__init_subclass__(**kwargs)
        inherited = cls.decide_batch is Builder.decide_batch and cls.decisions is Builder.decisions
        if inherited and not hasattr(cls, "decide"):
            raise TypeError(f"{cls.__name__} must define decide(item), decide_batch(batch) or decisions(items)")

    def decide_batch(self, batch: list) -> list[Decision]:
        """One decision per item of BATCH, in the order they are to be written (not necessarily the items');
        by default `decide(item)` for each, which a subclass that decides items one at a time defines."""
        return [self.decide(item) for item in batch]

    def batches(self, items: Iterable) -> Iterator[list]:
        yield from batched(items, self.batch_size)

    def decisions(self, items: Iterable) -> Iterator[Decision]:
        for batch in self.batches(items):
            decided = self.decide_batch(batch)
            # Every item must come out as rows or as a reject: one dropped silently is a gap nobody can explain.
            if len(decided) != len(batch):
                raise RuntimeError(f"{type(self).__name__} decided {len(decided)} of a batch of {len(batch)} items")
            yield from decided

    def run(self, items: Iterable, out: BuildOutput) -> BuildOutput:
        for decision in self.decisions(items):
            out.add(decision)
        return out


class BuildOutput:
    """Where a build's decisions go, as a context manager. DATA maps each split to its parquet file (rows in SCHEMA,
    written in row groups of ROW_GROUP rows; None: one group when the file is closed); REJECTS is the file of rejects
    (UTF-8 JSON lines, not \\u escapes, as datatrove's writers leave text). When the block ends the data files appear,
    then the rejects; when it raises the data files do not, and the rejects do only with KEEP_REJECTS (records that
    say why a run gave up). Without DATA kept rows are held in `held[split]` for the caller, without REJECTS the
    reject records in `held_rejects`.

    LIMITS caps the rows of a split: an item kept for a split already full is surplus (counted, neither written nor
    rejected), as when an LLM job was sent more problems than a split still needs. NUMBER(row, index) is called with
    each row's position in its split before it is written. The progress bar counts items decided (status: rows kept),
    or with BAR_COUNTS="rows" the rows written against TOTAL."""

    def __init__(
        self,
        data: dict[str, Path] | None = None,
        schema: pa.Schema | None = None,
        rejects: Path | None = None,
        *,
        keep_rejects: bool = False,
        row_group: int | None = 1000,
        limits: dict[str, int] | None = None,
        number: Callable[[Any, int], None] | None = None,
        progress: bool = False,
        label: str = "build",
        total: int | None = None,
        unit: str = "item",
        bar_counts: str = "items",
    ):
        if data and schema is None:
            raise ValueError("a parquet data file needs a schema")
        if bar_counts not in ("items", "rows"):
            raise ValueError(f"bar_counts is 'items' or 'rows', not {bar_counts!r}")
        self.data = {split: Path(path) for split, path in (data or {}).items()}
        self.schema = schema
        self.rejects_path = Path(rejects) if rejects is not None else None
        self.keep_rejects = keep_rejects
        self.row_group = row_group
        self.limits = limits or {}
        self.number = number
        self.kept = self.rejected = self.surplus = 0
        self.rows: dict[str, int] = dict.fromkeys(self.data, 0)
        self.by_source: defaultdict[str, Counter] = defaultdict(Counter)
        self.by_reason: Counter = Counter()
        self.held: defaultdict[str, list] = defaultdict(list)
        self.held_rejects: list[dict] = []
        self._bar_args = (label, total, progress, unit)
        self._bar_counts = bar_counts
        self._stack: ExitStack | None = None

    @property
    def decided(self) -> int:
        """Items decided so far: each one is kept, rejected or surplus."""
        return self.kept + self.rejected + self.surplus

    def __enter__(self) -> Self:
        with ExitStack() as stack:
            # Entered in this order so that, the block done, the bar closes, the parquet files are closed and appear,
            # and the rejects appear last.
            self._rejects = None
            if self.rejects_path is not None:
                opener = atomic_open_kept if self.keep_rejects else atomic_open
                self._rejects = stack.enter_context(opener(self.rejects_path))
            self._partials = {split: stack.enter_context(atomic_path(path)) for split, path in self.data.items()}
            self._writers = {split: pq.ParquetWriter(partial, self.schema) for split, partial in self._partials.items()}
            self._buffers: dict[str, list] = {split: [] for split in self.data}
            stack.push(self._close_writers)
            self._bar = stack.enter_context(ProgressBar(*self._bar_args))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc) -> bool | None:
        stack, self._stack = self._stack, None
        return stack.__exit__(*exc)

    def add(self, decision: Decision) -> None:
        if isinstance(decision, Reject):
            self._reject(decision)
        elif any(self.rows.get(split, 0) >= self.limits.get(split, math.inf) for split, _ in decision.rows):
            self.surplus += 1
        else:
            self.kept += 1
            self.by_source[decision.source]["kept"] += 1
            for split, row in decision.rows:
                self._write(split, row)
        if self._bar_counts == "items":
            self._bar.advance()
            self._bar.status(f"kept {self.kept:,}")

    def revise(self, split: str, decide: Callable[[list], list[Decision]], added: Iterable[pa.Field] = ()) -> None:
        """A second decision over the rows kept in SPLIT before any file appears (mcqa's LLM reformulation reads them
        all at once): the rows of its Keeps, with the fields ADDED to the file's schema, replace the split's rows; its
        Rejects go to the rejects and count as rejected instead of kept."""
        self._flush(split)
        self._writers.pop(split).close()
        partial = self._partials[split]
        table = pq.read_table(partial)
        rows = table.to_pylist()
        decided = decide(rows)
        if len(decided) != len(rows):
            raise RuntimeError(f"the revision decided {len(decided)} of {len(rows)} rows")
        kept = []
        for decision in decided:
            if isinstance(decision, Reject):
                self.kept -= 1
                self.rows[split] -= 1
                self.by_source[decision.source]["kept"] -= 1
                self._reject(decision)
            else:
                kept += [row for _, row in decision.rows]
        # The schema as the file gives it back, so that the rewritten file is the one a first write would make.
        schema = table.schema
        for field in added:
            schema = schema.append(field)
        pq.write_table(pa.Table.from_pylist(kept, schema=schema), partial)

    def _reject(self, decision: Reject) -> None:
        self.rejected += 1
        counts = self.by_source[decision.source]
        counts["rejected"] += 1
        counts[decision.reason] += 1
        self.by_reason[decision.reason] += 1
        if self._rejects is None:
            self.held_rejects.append(decision.record)
        else:
            self._rejects.write(json.dumps(decision.record, ensure_ascii=False) + "\n")

    def _write(self, split: str, row: Any) -> None:
        if split not in self.data:
            if self.data:
                raise ValueError(f"no data file for split {split!r} (splits: {', '.join(self.data)})")
            self.held[split].append(row)
            return
        if self.number is not None:
            self.number(row, self.rows[split])
        self.rows[split] += 1
        self._buffers[split].append(row)
        if self.row_group is not None and len(self._buffers[split]) >= self.row_group:
            self._flush(split)
        if self._bar_counts == "rows":
            self._bar.advance()

    def _flush(self, split: str) -> None:
        # With no row group size the rows go out as one group when the file closes, even none: the bytes of
        # pyarrow's own write_table.
        buffer = self._buffers[split]
        if buffer or self.row_group is None:
            self._writers[split].write_table(pa.Table.from_pylist(buffer, schema=self.schema))
            buffer.clear()

    def _close_writers(self, exc_type, *_) -> None:
        # The last rows are written only when the block ended well: after a failure the files are removed anyway.
        for split in list(self._writers):
            if exc_type is None:
                self._flush(split)
            self._writers.pop(split).close()
