"""eval-gate, distill and stats take one job each (issue 16 part 4), run by pipelines.eval_gate.evaluate_gate(job),
pipelines.distill.distill(job) and pipelines.stats.tag_stats(job). None of them claims its output (distill refuses
a filled folder instead), so what is pinned is the job each argv makes and what its function does with it."""

from __future__ import annotations

import inspect
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.distilled import DEFAULT_EMBEDDING_MODEL, DEFAULT_MAX_CHUNKS
from curate.cli import app
from curate.flows.common import job_model
from curate.pipelines.distill import DistillError, distill, train_distilled
from curate.pipelines.eval_gate import evaluate_gate
from curate.pipelines.jobs import DistillJob, EvalGateJob, StatsJob
from curate.pipelines.readers import InputSpec
from curate.pipelines.stats import UnfinishedTags, tag_stats
from curate.schema import ATTRIBUTE_SCHEMA, Labels, attribute_row
from tests.support.jobs import job_from

# Texts whose cues_v1 verdict is plain: the first two show a behavior (the gate passes them), the others none.
BACKTRACKS = "Wait, that is wrong. Let me try another way: 3 + 4 = 7."
VERIFIES = "Let me check: 2 + 2 = 4. Yes, that is correct."
PLAIN = "The sky over the harbour was grey all afternoon."
FACT = "Paris is the capital of France."


def write_jsonl(path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def llm_row(doc_id: str, route: str, **counts) -> dict:
    """An LLM shard row: the counts given, 0 for the other behaviors; counts=None: the LLM gave none."""
    unknown = counts.pop("unknown", False)
    return {"id": doc_id, "route": route, **{b: None if unknown else counts.get(b, 0) for b in BEHAVIOR_NAMES}}


def test_eval_gate_measures_the_gate_on_the_documents_the_llm_labelled(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    write_jsonl(corpus, [{"id": "a", "text": BACKTRACKS}, {"id": "b", "text": VERIFIES}, {"id": "c", "text": PLAIN},
                         {"id": "d", "text": FACT}, {"id": "n", "text": PLAIN}, {"id": "g", "text": BACKTRACKS},
                         {"id": "a", "text": FACT}])  # a repeated id: compared once, as first read
    labels = tmp_path / "llm_v1"
    labels.mkdir()
    pq.write_table(pa.Table.from_pylist([
        llm_row("a", "llm", backtracking=1), llm_row("b", "llm", verification=2), llm_row("c", "llm", subgoal_setting=1),
        llm_row("d", "llm"), llm_row("n", "llm", unknown=True), llm_row("g", "gated_out:cues_v1"),
        llm_row("z", "llm", verification=1),  # not in the corpus
    ]), labels / "00000.parquet")
    job = job_from(EvalGateJob, ["--labels", str(labels), "--input", str(corpus), "--gate", "cues_v1", "--sample", "50",
                                 "--seed", "3"])
    assert (job.labels, job.gate, job.sample, job.seed, job.corpus.path) == (labels, "cues_v1", 50, 3, str(corpus))

    report, missing = evaluate_gate(job)
    # The gated-out row is not in the sample; the row without counts cannot say what the gate missed.
    assert (report.documents, report.skipped_unlabelled, missing) == (4, 1, 1)
    assert report.llm_positive == {"verification": 1, "backtracking": 1, "subgoal_setting": 1, "backward_chaining": 0}
    assert report.caught == {"verification": 1, "backtracking": 1, "subgoal_setting": 0, "backward_chaining": 0}
    assert (report.any_positive, report.any_caught, report.passed, report.requests_saved) == (3, 2, 2, 0.5)
    sampled = evaluate_gate(job_from(EvalGateJob, ["--labels", str(labels), "--input", str(corpus), "--sample", "2"]))
    assert sampled[0].documents + sampled[0].skipped_unlabelled + sampled[1] == 2

    shown = CliRunner().invoke(app, ["eval-gate", "--labels", str(labels), "--input", str(corpus), "--gate", "cues_v1"])
    assert shown.exit_code == 0 and "50.0 %" in shown.output
    (tmp_path / "empty").mkdir()
    refused = CliRunner().invoke(app, ["eval-gate", "--labels", str(tmp_path / "empty"), "--input", str(corpus)])
    assert refused.exit_code == 2 and "no LLM attribute shards" in refused.output


def test_distill_job_hands_train_distilled_the_options_of_the_command(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    write_jsonl(corpus, [{"doc": "a", "body": BACKTRACKS}])
    job = job_from(DistillJob, ["--labels", "tags/cues_v1", "--texts", str(corpus), "--text-key", "body", "--id-key",
                                "doc", "-o", str(tmp_path / "model"), "--head", "mlp", "--validation", "0.2",
                                "--regularization", "0.001", "--limit", "24", "--max-chunks", "1"])
    assert job.corpus == InputSpec(path=str(corpus), text_key="body", id_key="doc")
    assert (job.head, job.validation, job.regularization, job.limit, job.max_chunks, job.test) == (
        "mlp", 0.2, 0.001, 24, 1, 0.15)
    # The command's defaults are the trainer's (and the distilled classifier's, which --help must not import).
    defaults = job_from(DistillJob, ["--labels", "t", "--texts", str(corpus), "-o", "m"])
    trainer = inspect.signature(train_distilled).parameters
    for name in ("embedding_model", "max_chunks", "validation", "test", "min_positives", "regularization", "seed",
                 "limit", "batch_size", "head", "level"):
        assert getattr(defaults, name) == trainer[name].default, name
    assert (defaults.embedding_model, defaults.max_chunks) == (DEFAULT_EMBEDDING_MODEL, DEFAULT_MAX_CHUNKS)

    # A filled output is refused before any label is read or model loaded.
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "notes.txt").write_text("mine")
    with pytest.raises(DistillError, match="exists and is not empty"):
        distill(job, progress=False)
    assert (tmp_path / "model" / "notes.txt").read_text() == "mine"


def test_stats_job_describes_the_shards_and_the_unfinished_tasks(tmp_path):
    shards = tmp_path / "tags" / "cues_v1"
    shards.mkdir(parents=True)
    rows = [attribute_row(doc_id, 10, Labels(counts={b: count if b == "backtracking" else 0 for b in BEHAVIOR_NAMES}),
                          "cues_v1", None, "v1") for doc_id, count in (("a", 2), ("b", 0), ("c", 1))]
    pq.write_table(pa.Table.from_pylist(rows, schema=ATTRIBUTE_SCHEMA), shards / "00000.parquet")
    logs = shards / "_logs"
    (logs / "completions").mkdir(parents=True)
    (logs / "executor.json").write_text(json.dumps({"tasks": 2}))
    (logs / "completions" / "00000").write_text("")  # task 1 never finished

    job = job_from(StatsJob, [str(shards)])
    assert (job.directory, job.plot) == (shards, None)
    result = tag_stats(job)
    [described] = result.classifiers
    assert (described.classifier, described.documents, described.present["backtracking"]) == ("cues_v1", 3, 2)
    assert result.unfinished == [UnfinishedTags(shards, 1, 2)] and result.plot is None
    # A flow made from the job (its paths are strings, as deployments give them) runs the same function.
    parameters = job_model(StatsJob, "Stats.", __name__)(directory=str(shards))
    assert tag_stats(parameters.job()) == result

    # The console wraps at 80 columns off a terminal, where a long temp path moves the break; read the words.
    shown = CliRunner().invoke(app, ["stats", str(shards)])
    said_words = " ".join(shown.output.split())
    assert shown.exit_code == 0 and "1 of 2 tagging tasks are unfinished" in said_words
    for directory, said in ((tmp_path / "nowhere", "does not exist"), (logs, "no parquet shards")):
        refused = CliRunner().invoke(app, ["stats", str(directory)])
        assert refused.exit_code == 2 and said in " ".join(refused.output.split())


def test_classifiers_lists_every_name_on_stdout_in_version_order_with_its_aliases():
    from curate.classifiers.base import DEFAULT_VERSION, registered_names

    result = CliRunner().invoke(app, ["classifiers"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    names = [line.split()[0] for line in lines]
    assert sorted(names) == registered_names()  # every registered name once, first column: what --classifier takes
    assert names.index("cues_v2") < names.index("cues_v10") < names.index("cues_v12")
    assert all(len(line) <= 80 for line in lines)
    for alias, target in DEFAULT_VERSION.items():
        assert alias in lines[names.index(target)].split("[= ")[1]
    assert all(line.split(None, 1)[1:] for line in lines)  # each says what it is
