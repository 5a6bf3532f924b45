"""The shared builder loop and output (curate.builders.base), checked against the files it writes."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.builders.base import Builder, BuildOutput, Keep, Reject
from curate.files import PARTIAL

SCHEMA = pa.schema([("id", pa.string()), ("value", pa.int64()), ("source", pa.string())])
REVISED = SCHEMA.append(pa.field("note", pa.string()))


class Parity(Builder):
    """Keeps the even numbers, rejects the odd ones (reason `odd`, or `seven` for multiples of 7); the source is the
    number mod 3. Raises on CRASH_AT, to stand for a build that fails half way."""

    def __init__(self, crash_at: int | None = None):
        self.crash_at = crash_at

    def decide(self, n: int):
        if n == self.crash_at:
            raise RuntimeError(f"crash at {n}")
        source = f"s{n % 3}"
        if n % 2 == 0:
            return Keep.row({"id": str(n), "value": n, "source": source}, source=source)
        reason = "seven" if n % 7 == 0 else "odd"
        return Reject(reason, {"id": str(n), "source": source, "reason": f"{reason}: {n} is odd", "note": "é"}, source)


class Batched(Parity):
    batch_size = 64

    def decide_batch(self, batch):
        # The rejects of a batch first, then its keeps: a builder may order them as it writes them.
        decisions = [self.decide(n) for n in batch]
        return [d for d in decisions if isinstance(d, Reject)] + [d for d in decisions if isinstance(d, Keep)]


def _output(tmp_path, **options) -> BuildOutput:
    return BuildOutput(
        {"train": tmp_path / "data" / "train-00000.parquet"}, SCHEMA, tmp_path / "rejects" / "rejects.jsonl", **options
    )


def _files(tmp_path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())


def _rejects(tmp_path) -> list[dict]:
    return [
        json.loads(line) for line in (tmp_path / "rejects" / "rejects.jsonl").read_text(encoding="utf-8").splitlines()
    ]


@pytest.mark.parametrize("builder", [Parity(), Batched()], ids=["one_by_one", "batched"])
def test_every_item_is_a_row_or_a_reject_and_the_counts_are_those_of_the_files(tmp_path, builder):
    items = range(2_345)
    with _output(tmp_path, row_group=500) as out:
        builder.run(items, out)
    table = pq.read_table(tmp_path / "data" / "train-00000.parquet")
    rows, rejects = table.to_pylist(), _rejects(tmp_path)
    assert table.schema == SCHEMA and pq.ParquetFile(tmp_path / "data" / "train-00000.parquet").num_row_groups == 3
    kept_ids, rejected_ids = [r["id"] for r in rows], [r["id"] for r in rejects]
    assert sorted(kept_ids + rejected_ids, key=int) == [str(n) for n in items]  # each once, none lost
    assert [int(i) for i in kept_ids] == [n for n in items if n % 2 == 0]  # the input order
    assert out.kept == len(rows) and out.rejected == len(rejects) and out.decided == len(items)
    assert out.by_reason == Counter(r["reason"].split(":")[0] for r in rejects)
    per_source = Counter()
    for r in rows:
        per_source[r["source"], "kept"] += 1
    for r in rejects:
        per_source[r["source"], "rejected"] += 1
        per_source[r["source"], r["reason"].split(":")[0]] += 1
    assert {(s, k): v for s, counts in out.by_source.items() for k, v in counts.items()} == dict(per_source)
    # Rejects are UTF-8 text, not escapes, as datatrove's writers leave them.
    assert '"note": "é"' in (tmp_path / "rejects" / "rejects.jsonl").read_text(encoding="utf-8")
    assert _files(tmp_path) == ["data/train-00000.parquet", "rejects/rejects.jsonl"]


def test_a_crash_half_way_leaves_no_finished_looking_file(tmp_path):
    with _output(tmp_path) as out:
        Parity().run(range(10), out)
    before = {name: (tmp_path / name).read_bytes() for name in _files(tmp_path)}
    with pytest.raises(RuntimeError, match="crash at 500"), _output(tmp_path, row_group=100) as out:
        Parity(crash_at=500).run(range(1_000), out)
    # The earlier run's files stand as they were, and nothing half written is left beside them.
    assert {name: (tmp_path / name).read_bytes() for name in _files(tmp_path)} == before
    assert not any(PARTIAL in name for name in _files(tmp_path))

    # Rejects that say why a run gave up outlive the failure when asked; the data still does not appear.
    with pytest.raises(RuntimeError), _output(tmp_path / "kept", keep_rejects=True) as out:
        Parity(crash_at=500).run(range(1_000), out)
    assert _files(tmp_path / "kept") == ["rejects/rejects.jsonl"]
    assert len(_rejects(tmp_path / "kept")) == out.rejected == 250


def test_a_batch_decided_short_is_an_error_not_a_gap(tmp_path):
    class Drops(Parity):
        batch_size = 10

        def decide_batch(self, batch):
            return [self.decide(n) for n in batch[1:]]

    with pytest.raises(RuntimeError, match="decided 9 of a batch of 10"), _output(tmp_path) as out:
        Drops().run(range(30), out)
    assert _files(tmp_path) == []


def test_limits_number_the_rows_and_count_the_rest_as_surplus(tmp_path):
    def number(row, index):
        row["id"] = f"row-{index}"

    with _output(tmp_path, limits={"train": 3}, number=number) as out:
        Parity().run(range(12), out)
    rows = pq.read_table(tmp_path / "data" / "train-00000.parquet").to_pylist()
    assert [(r["id"], r["value"]) for r in rows] == [("row-0", 0), ("row-1", 2), ("row-2", 4)]
    assert (out.kept, out.surplus, out.rejected, out.decided) == (3, 3, 6, 12)


def test_revise_replaces_the_rows_and_moves_refusals_to_the_rejects(tmp_path):
    def revise(rows):
        return [
            Reject("too_big", {"id": r["id"], "reason": "too_big"}, r["source"])
            if r["value"] >= 6
            else Keep.row({**r, "note": "checked"}, source=r["source"])
            for r in rows
        ]

    with _output(tmp_path, row_group=2) as out:
        Parity().run(range(10), out)
        out.revise("train", revise, [pa.field("note", pa.string())])
    table = pq.read_table(tmp_path / "data" / "train-00000.parquet")
    assert table.schema == REVISED and [(r["value"], r["note"]) for r in table.to_pylist()] == [
        (0, "checked"),
        (2, "checked"),
        (4, "checked"),
    ]
    rejects = _rejects(tmp_path)
    assert [r["id"] for r in rejects] == ["1", "3", "5", "7", "9", "6", "8"]  # the revision's after the first pass's
    assert (out.kept, out.rejected) == (3, 7) and out.by_reason["too_big"] == 2
    assert dict(out.by_source["s0"]) == {"kept": 1, "rejected": 3, "odd": 2, "too_big": 1}


def test_without_files_the_decisions_are_held(tmp_path):
    with BuildOutput() as out:
        Parity().run(range(5), out)
    assert [r["value"] for r in out.held["train"]] == [0, 2, 4]
    assert [r["id"] for r in out.held_rejects] == ["1", "3"]
    assert _files(tmp_path) == []


def test_a_builder_that_decides_nothing_fails_where_it_is_written():
    with pytest.raises(TypeError, match="must define decide"):

        class DecidesNothing(Builder):
            batch_size = 4
