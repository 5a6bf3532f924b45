"""No silent wrong data on the tag -> build path (issue 20), run as a user runs it: real files, the real CLI,
exit codes checked. A changed corpus, an occupied output folder, an empty or all-rejected run, a BOM, an
interrupt."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
from typer.testing import CliRunner

from curate.classifiers import resolve_name
from curate.cli import app

runner = CliRunner()


def run(*args: str, code: int = 0):
    result = runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == code, result.output
    return result


def write_docs(path: Path, prefix: str, n: int, mode: str = "w") -> None:
    with path.open(mode) as f:
        for i in range(n):
            f.write(json.dumps({"id": f"{prefix}-{i}", "text": f"Plain note {prefix} number {i}.", "site": "x"}) + "\n")


def tag_rows(tags_root: Path) -> list[tuple]:
    folder = Path(tags_root) / resolve_name("cues")[0]
    return duckdb.sql(f"SELECT id, source FROM read_parquet('{folder}/*.parquet')").fetchall()


def test_added_and_grown_files_are_tagged_once_and_reach_the_dataset(tmp_path: Path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_docs(corpus / "a.jsonl", "a", 20)
    write_docs(corpus / "b.jsonl", "b", 30)
    build = ["build", "--behaviors", "none", "--input", str(corpus), "--output", str(tmp_path / "D")]
    first = run(*build)
    assert "50" in first.output
    write_docs(corpus / "c.jsonl", "c", 40)
    write_docs(corpus / "b.jsonl", "bb", 30, mode="a")
    run(*build)
    rows = tag_rows(tmp_path / "D" / "tags")
    assert len(rows) == len({r[0] for r in rows}) == 120  # the grown file's old rows replaced, not duplicated
    data = pq.read_table(tmp_path / "D" / "data").to_pydict()
    assert len(data["id"]) == 120
    (corpus / "a.jsonl").unlink()
    run("tag", "--input", str(corpus), "--output", str(tmp_path / "D" / "tags"))
    assert {r[1] for r in tag_rows(tmp_path / "D" / "tags")} == {"b.jsonl", "c.jsonl"}
    written = [p.name for p in (tmp_path / "D").rglob("*")]  # nor a purge, manifest or selection left half-written
    assert not [name for name in written if name.endswith((".partial", ".tmp", ".purge"))], written


def test_verify_inputs_sees_a_change_that_keeps_size_and_mtime(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    before, after = "Here, that's right. Let me read it.", "Wait, that's wrong. Let me redo it."
    assert len(before) == len(after)
    corpus.write_text(json.dumps({"id": "x", "text": before}) + "\n")
    tags = tmp_path / "tags"
    run("tag", "--input", str(corpus), "--output", str(tags), "--verify-inputs")
    stat = corpus.stat()
    corpus.write_text(json.dumps({"id": "x", "text": after}) + "\n")
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    run("tag", "--input", str(corpus), "--output", str(tags))
    folder = Path(tags) / resolve_name("cues")[0]
    assert duckdb.sql(f"SELECT backtracking FROM '{folder}/*.parquet'").fetchall() == [(0,)]
    result = run("tag", "--input", str(corpus), "--output", str(tags), "--verify-inputs")
    assert "new or changed" in result.output
    assert duckdb.sql(f"SELECT backtracking FROM '{folder}/*.parquet'").fetchall() == [(1,)]


def test_occupied_output_is_refused_and_a_same_rerun_is_a_no_op(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    write_docs(corpus, "d", 5)
    out = tmp_path / "D"
    build = ["build", "--behaviors", "none", "--input", str(corpus), "--output", str(out)]
    run(*build)
    shard = next((out / "data").glob("*.parquet"))
    written = shard.stat().st_mtime_ns
    assert "up to date" in run(*build).output
    assert shard.stat().st_mtime_ns == written
    other = ["build", "--behaviors", "none", "--limit", "2", "--input", str(corpus), "--output", str(out)]
    refused = run(*other, code=2)
    assert "--overwrite" in refused.output and "--limit" in refused.output
    assert shard.exists() and shard.stat().st_mtime_ns == written
    run(*other, "--overwrite")
    assert len(pq.read_table(out / "data")) == 2
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert "did not write" in run(*build[:-1], str(foreign), "--overwrite", code=2).output
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_all_rejected_and_empty_inputs_fail_with_the_reason(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    write_docs(corpus, "d", 4)
    tags = tmp_path / "tags"
    result = run("tag", "--input", str(corpus), "--output", str(tags), "--text-key", "body", code=2)
    assert "all 4 records were rejected" in result.output and "fields: id, site, text" in result.output
    run("tag", "--input", str(corpus), "--output", str(tags))  # the fixed command replaces the empty tags
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert "hold no records" in run("tag", "--input", str(empty), "--output", str(tmp_path / "t2"), code=2).output
    gz = tmp_path / "corpus.gz"
    gz.write_bytes(gzip.compress(corpus.read_bytes()))
    assert "NAME.jsonl.gz" in run("tag", "--input", str(gz), "--output", str(tmp_path / "t3"), code=2).output
    (tmp_path / "nothing").mkdir()
    for pattern in (str(tmp_path / "nothing"), str(tmp_path / "*.parquet")):
        result = run("tag", "--input", pattern, "--output", str(tmp_path / "t4"), code=2)
        assert "No files found" in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_a_bom_does_not_cost_the_first_record(tmp_path: Path):
    corpus = tmp_path / "bom.jsonl"
    corpus.write_bytes(b"\xef\xbb\xbf" + b'{"id": "first", "text": "Plain."}\n{"id": "second", "text": "Plain too."}\n')
    run("tag", "--input", str(corpus), "--output", str(tmp_path / "tags"))
    assert sorted(r[0] for r in tag_rows(tmp_path / "tags")) == ["first", "second"]


def test_an_interrupted_tag_leaves_no_finished_looking_shard_and_resumes(tmp_path: Path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for k in range(3):
        write_docs(corpus / f"part{k}.jsonl", f"p{k}", 2000)
    tags = tmp_path / "tags"
    command = [sys.executable, "-m", "curate.cli", "tag", "--input", str(corpus), "--output", str(tags), "--tasks", "3"]
    folder = Path(tags) / resolve_name("cues")[0]
    completions = folder / "_logs" / "completions"
    for sent in (signal.SIGINT, signal.SIGTERM):
        finished_before = len(list(completions.glob("*")))
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env={**os.environ, "COLUMNS": "200"})
        deadline = time.monotonic() + 120
        while len(list(completions.glob("*"))) <= finished_before and time.monotonic() < deadline:  # mid-run
            time.sleep(0.05)
        process.send_signal(sent)
        output, _ = process.communicate(timeout=120)
        if process.returncode == 0:
            continue  # finished before the signal arrived: nothing was interrupted
        assert process.returncode == 130, output
        assert "interrupted: run the same command again to resume" in output
        done = {p.name for p in completions.glob("*")}
        for shard in folder.glob("*.parquet"):
            assert shard.name.rsplit("_", 1)[1].removesuffix(".parquet") in done, shard
        stats = run("stats", str(tags))
        assert "unfinished" in stats.output
    run("tag", "--input", str(corpus), "--output", str(tags), "--tasks", "3")
    rows = tag_rows(tags)
    assert len(rows) == len({r[0] for r in rows}) == 6000


def test_priming_and_export_claim_their_folders_and_a_failed_export_leaves_nothing(tmp_path: Path):
    priming = ["priming", "--variant", "only_backtracking", "--n", "6", "--test-n", "2", "-o", str(tmp_path / "P")]
    run(*priming)
    shard = tmp_path / "P" / "data" / "train-00000.parquet"
    written = shard.stat().st_mtime_ns
    assert "up to date" in run(*priming).output and shard.stat().st_mtime_ns == written
    fewer = [*priming[:3], "--n", "4", *priming[5:]]
    refused = run(*fewer, code=2)
    assert "--overwrite" in refused.output and "--n" in refused.output and shard.stat().st_mtime_ns == written
    run(*fewer, "--overwrite")
    assert len(pq.read_table(shard)) == 4

    export = ["export", str(tmp_path / "P"), "--to", "sft", "-o", str(tmp_path / "E")]
    run(*export)
    # Numbered within each split: one train file is train-00000, not train-00001 after test-00000.
    assert sorted(p.name for p in (tmp_path / "E" / "data").iterdir()) == ["test-00000.parquet", "train-00000.parquet"]
    assert "up to date" in run(*export).output
    assert "--to" in run("export", str(tmp_path / "P"), "--to", "cpt", "-o", str(tmp_path / "E"), code=2).output
    other = run("mcqa", "-i", str(shard), "-o", str(tmp_path / "E"), code=2)
    assert "a `curate export` dataset" in other.output
    assert (tmp_path / "E" / "data" / "train-00000.parquet").is_file()

    text_only = tmp_path / "T" / "data"
    text_only.mkdir(parents=True)
    pq.write_table(pq.read_table(shard).select(["id"]), text_only / "train-00000.parquet")
    failed = run("export", str(tmp_path / "T"), "--to", "sft", "-o", str(tmp_path / "F"), code=2)
    assert "question" in failed.output and not (tmp_path / "F").exists()


def test_build_keeps_source_columns_and_its_card_reproduces_with_the_tags(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Plain note {i}.", "url": f"http://x/{i}", "n": i}) + "\n"
                              for i in range(4)))
    out, tags = tmp_path / "D", tmp_path / "T"
    run("build", "--behaviors", "none", "--input", str(corpus), "-o", str(out), "--tags", str(tags),
        "--keep-columns", "url,n")
    data = pq.read_table(out / "data").to_pydict()
    assert sorted(zip(data["id"], data["url"], data["n"])) == [(f"d{i}", f"http://x/{i}", i) for i in range(4)]
    assert sorted(data["text"]) == [f"Plain note {i}." for i in range(4)]
    card = (out / "README.md").read_text()
    assert f"--tags {tags}" in card and "--keep-columns url,n" in card
    missing = run("build", "--behaviors", "none", "--input", str(corpus), "-o", str(tmp_path / "D2"), "--tags", str(tags),
                  "--keep-columns", "licence", code=2)
    assert "licence" in missing.output and "fields: n, url" in missing.output


def test_help_and_stats_are_whole_at_80_columns(tmp_path: Path):
    narrow = CliRunner()
    for command in ("priming", "build", "cpt", "mcqa", "export", "filter-passrate", "tag"):
        result = narrow.invoke(app, [command, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        assert "…" not in result.output, command
        assert max(len(line) for line in result.output.splitlines()) <= 80, command
    help_text = narrow.invoke(app, ["priming", "--help"], env={"COLUMNS": "80"}).output
    assert "backtracking_verification" in help_text and "--no-fractional-division" in help_text
    corpus = tmp_path / "corpus.jsonl"
    write_docs(corpus, "d", 3)
    run("tag", "--input", str(corpus), "--output", str(tmp_path / "tags"))
    stats = narrow.invoke(app, ["stats", str(tmp_path / "tags")], env={"COLUMNS": "80"})
    assert stats.exit_code == 0 and "…" not in stats.output, stats.output
    assert "backward = backward_chaining" in stats.output and "null rate" in stats.output


def test_typer_abort_and_usage_errors_keep_typer_exit_codes():
    import typer

    from curate.cli.app import CurateGroup

    probe = typer.Typer(cls=CurateGroup)

    @probe.command()
    def abort(usage: bool = False) -> None:
        raise typer.BadParameter("not that") if usage else typer.Abort()

    @probe.command()
    def other() -> None:
        pass

    aborted = runner.invoke(probe, ["abort"])
    assert aborted.exit_code == 1 and "error:" not in aborted.output  # typer.Abort is a RuntimeError: not a user error
    usage = runner.invoke(probe, ["abort", "--usage"])
    assert usage.exit_code == 2 and "not that" in usage.output and "error:" not in usage.output
