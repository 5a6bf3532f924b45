"""Duplicate ids: the first copy in (file, position) order is the one kept - within a file, across the files of one
task, and across tasks - and every other copy is a `duplicate_id` reject with its source. Tag, build, stats and
CPT's pools all apply the same rule (query.open_shards)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datatrove.executor import LocalPipelineExecutor
from typer.testing import CliRunner

from curate.behaviors import BEHAVIOR_NAMES, Behavior
from curate.builders.behavior import run_build
from curate.builders.cpt.selection import CPTSelection, select_pools, tag_files
from curate.cli import app
from curate.pipelines.query import (
    KEPT_ELSEWHERE,
    Selection,
    behavior_stats,
    count_rejects,
    parquet_files,
    select_ids,
    write_duplicate_rejects,
    write_kept_copies,
)
from curate.pipelines.readers import InputSpec, make_reader
from curate.pipelines.steps import (
    DatasetWriter,
    KeepFirstCopy,
    KeepSelected,
    SplitRejects,
)
from curate.pipelines.tag import run_tagging
from curate.schema import ATTRIBUTE_SCHEMA

# cues_v1 finds verification and backtracking in the first; nothing in the plain ones.
BEHAVING = "Let me check: 12 * 7 = 84, which matches the total. Wait, that is wrong; I should try a different approach."
PLAIN = ["The area of the triangle is half the base times the height.", "The river flows north past the old mill.",
         "Copper conducts heat well.", "The museum opens at nine."]


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def shard_rows(tags_dir: Path) -> list[dict]:
    return [row for p in sorted(tags_dir.glob("*attributes_*.parquet")) for row in pq.read_table(p).to_pylist()]


def reject_rows_in(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().split("\n") if line]


def reject_rows(folder: Path) -> list[dict]:
    return [row for p in sorted(folder.glob("rejects_*.jsonl")) for row in reject_rows_in(p)]


def dataset_rows(output: Path) -> list[dict]:
    return [row for p in sorted((output / "data").glob("*.parquet")) for row in pq.read_table(p).to_pylist()]


def test_a_repeated_id_within_a_file_is_rejected_with_its_position(tmp_path):
    write_jsonl(tmp_path / "corpus" / "a.jsonl", [
        {"id": "x", "text": PLAIN[0]}, {"id": "y", "text": PLAIN[1]}, {"id": "x", "text": BEHAVING}, {"text": PLAIN[2]},
        {"text": PLAIN[2]},  # same text, no id: ids made from the position differ, so both are kept
    ])
    result = run_tagging(InputSpec(str(tmp_path / "corpus")), tmp_path / "tags", progress=False)
    rows = shard_rows(result.tags_dir)
    assert sorted(r["id"] for r in rows) == ["a.jsonl/3", "a.jsonl/4", "x", "y"]
    assert next(r for r in rows if r["id"] == "x")["n_chars"] == len(PLAIN[0])  # the first copy
    assert {r["source"] for r in rows} == {"a.jsonl"}
    [reject] = reject_rows(result.rejects_dir)
    assert reject["reason"].startswith("duplicate_id:")
    assert (reject["id"], reject["source"], reject["position"]) == ("x", "a.jsonl", 2)
    assert json.loads(reject["raw"])["text"] == BEHAVING
    assert count_rejects(result.rejects_dir) == {"duplicate_id": 1}


def test_a_repeated_id_within_a_parquet_file_keeps_its_record(tmp_path):
    (tmp_path / "corpus").mkdir()
    pq.write_table(pa.table({"id": ["p", "p"], "text": [PLAIN[0], PLAIN[1]], "lang": ["en", "fr"]}),
                   tmp_path / "corpus" / "a.parquet")
    result = run_tagging(InputSpec(str(tmp_path / "corpus")), tmp_path / "tags", progress=False)
    assert [r["n_chars"] for r in shard_rows(result.tags_dir)] == [len(PLAIN[0])]
    [reject] = reject_rows(result.rejects_dir)
    assert (reject["id"], reject["position"]) == ("p", 1)
    assert json.loads(reject["raw"]) == {"id": "p", "text": PLAIN[1], "lang": "fr"}


@pytest.fixture
def two_files(tmp_path) -> Path:
    """'shared' is in both files with different texts: a.jsonl's plain copy comes first and is the one kept, even
    though b.jsonl's copy would be the one selected for its behaviors."""
    corpus = tmp_path / "corpus"
    write_jsonl(corpus / "a.jsonl", [{"id": "shared", "text": PLAIN[0]}, {"id": "a1", "text": PLAIN[1]}])
    write_jsonl(corpus / "b.jsonl", [{"id": "b1", "text": BEHAVING}, {"id": "shared", "text": BEHAVING},
                                     {"id": "b2", "text": PLAIN[3]}])
    return corpus


# Not (1, 2): a build with more tasks than the tags were made with tags the missing ranks again (see the report).
@pytest.mark.parametrize(("tag_tasks", "build_tasks"), [(2, 2), (2, 1), (1, 1)])
def test_a_repeated_id_across_files_is_built_once_from_the_first_file(tmp_path, two_files, tag_tasks, build_tasks):
    spec = InputSpec(str(two_files))
    tagged = run_tagging(spec, tmp_path / "tags", tasks=tag_tasks, progress=False)
    [stats] = behavior_stats(tagged.tags_dir)
    assert stats.documents == 4 and stats.characters == len(PLAIN[0]) + len(PLAIN[1]) + len(BEHAVING) + len(PLAIN[3])
    [tag_reject] = reject_rows(tagged.rejects_dir)
    if tag_tasks == 2:  # each task tagged its copy; the shards keep both and every query counts a.jsonl's
        assert sorted(r["id"] for r in shard_rows(tagged.tags_dir)) == ["a1", "b1", "b2", "shared", "shared"]
        assert tag_reject["reason"] == "duplicate_id: the copy from a.jsonl is kept"
    else:
        assert tag_reject["position"] == 1
    assert (tag_reject["id"], tag_reject["source"]) == ("shared", "b.jsonl")

    output = tmp_path / "out"
    plain = run_build(spec, output, Selection(behaviors=None), tags_root=tmp_path / "tags", tasks=build_tasks,
                      progress=False)
    rows = dataset_rows(output)
    assert sorted(r["id"] for r in rows) == ["a1", "b2", "shared"]
    shared = next(r for r in rows if r["id"] == "shared")
    assert (shared["text"], shared["source"]) == (PLAIN[0], "a.jsonl")
    [build_reject] = reject_rows(output / "rejects")
    assert (build_reject["id"], build_reject["source"], build_reject["reason"].split(":")[0]) == (
        "shared", "b.jsonl", "duplicate_id")
    assert plain.cross_file_duplicates == build_tasks - 1
    card = (output / "README.md").read_text()
    assert "| duplicate_id | 1 |" in card

    # b.jsonl's copy shows behaviors, but it is not the copy kept: a selection of behaviors does not see it.
    behaving = run_build(spec, tmp_path / "behaving", Selection(behaviors=[Behavior.VERIFICATION]),
                         tags_root=tmp_path / "tags", tasks=build_tasks, progress=False)
    assert [r["id"] for r in dataset_rows(tmp_path / "behaving")] == ["b1"]
    assert behaving.selected == 1


def test_a_pass_with_more_tasks_than_the_tags_drops_the_copies_the_tags_dropped(tmp_path, two_files):
    """Tags made by one task hold no second copy; a two-task pass over the corpus (as `curate cpt` makes) still
    drops b.jsonl's copy, because the kept-copies table comes from the tag rejects too."""
    tagged = run_tagging(InputSpec(str(two_files)), tmp_path / "tags", tasks=1, progress=False)
    kept = tmp_path / "kept_copies.parquet"
    assert write_kept_copies(parquet_files(tagged.tags_dir), tagged.rejects_dir, kept) == 1
    assert pq.read_table(kept).to_pylist() == [{"id": "shared", "source": "a.jsonl"}]
    selection = tmp_path / "selection.parquet"
    assert select_ids(tagged.tags_dir, Selection(behaviors=None), selection) == 3
    LocalPipelineExecutor(
        pipeline=[make_reader(InputSpec(str(two_files))), KeepFirstCopy(str(kept)), SplitRejects(str(tmp_path / "rejects")),
                  KeepSelected(str(selection)), DatasetWriter(str(tmp_path / "out" / "data"))],
        tasks=2, logging_dir=str(tmp_path / "logs"),
    ).run()
    rows = dataset_rows(tmp_path / "out")
    assert sorted((r["id"], r["source"]) for r in rows) == [("a1", "a.jsonl"), ("b2", "b.jsonl"), ("shared", "a.jsonl")]
    [reject] = reject_rows(tmp_path / "rejects")
    assert (reject["id"], reject["source"], reject["reason"]) == ("shared", "b.jsonl", KEPT_ELSEWHERE.format("a.jsonl"))
    assert reject["raw"] == BEHAVING


def test_build_summary_reports_duplicates_dropped_across_files(tmp_path, two_files):
    result = CliRunner().invoke(app, ["build", "--input", str(two_files), "--output", str(tmp_path / "out"),
                                      "--behaviors", "none", "--tasks", "2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert re.search(r"duplicate ids dropped across files\W+1\b", result.output), result.output
    assert "duplicate_id: 1" in result.output


def test_cpt_pools_take_the_first_copy_of_a_repeated_id(tmp_path):
    """Hand-written shards: 'x' is enriched in b.jsonl's copy and minimized in a.jsonl's; the pools count it
    once, as minimized (a comes first). 'y' tagged twice from the same file (a rerun with another task count) is
    one record: counted once and not reported as a duplicate."""
    tags = tmp_path / "tags"
    tags.mkdir()

    def row(doc_id: str, source: str, count: int) -> dict:
        return {"id": doc_id, **dict.fromkeys(BEHAVIOR_NAMES, count), "evidence": [], "classifier": "cues_v1", "model": None,
                "prompt_version": "v1", "error": None, "n_chars": 100, "source": source}

    pq.write_table(pa.Table.from_pylist([row("x", "b.jsonl", 3), row("y", "c.jsonl", 0)], schema=ATTRIBUTE_SCHEMA),
                   tags / "attributes_00001.parquet")
    pq.write_table(pa.Table.from_pylist([row("x", "a.jsonl", 0), row("z", "a.jsonl", 2), row("y", "c.jsonl", 0)],
                                        schema=ATTRIBUTE_SCHEMA), tags / "attributes_00000.parquet")
    pools = select_pools(tags, CPTSelection(), 10**6, tmp_path / "pools.parquet", None)
    assert (pools["enriched"], pools["minimized"], pools["tagged"]) == (1, 2, 3)
    chosen = {r["id"]: r for r in pq.read_table(tmp_path / "pools.parquet").to_pylist()}
    assert (chosen["x"]["pool"], chosen["x"]["source"]) == ("minimized", "a.jsonl")
    assert chosen["z"]["pool"] == "enriched"
    assert write_duplicate_rejects(tag_files(tags), tmp_path / "dups.jsonl") == 1
    [reject] = reject_rows_in(tmp_path / "dups.jsonl")
    assert (reject["id"], reject["source"], reject["reason"]) == ("x", "b.jsonl", KEPT_ELSEWHERE.format("a.jsonl"))
