"""`curate priming` and `curate cpt` take one job each (PrimingJob, CPTJob; issue 16 part 4), and so do their flows:
the output claim records what the commands recorded before the jobs (else a rerun would refuse an existing dataset
as another one), the flows claim under the same record, and a wrong option is refused before anything is claimed.
The records below are those `curate priming` and `curate cpt` wrote into OUTPUT/.curate-output.json before."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from curate.builders.jobs import CPTJob, PrimingJob
from curate.builders.priming import priming_sets, resolve_preset
from curate.cli import SAMPLE_CORPUS, app
from curate.cli.build import typed_problem_space
from curate.cli.groups import job_command
from curate.flows.cpt import CPTParameters
from curate.flows.priming import PrimingParameters
from curate.options import offered
from curate.pipelines.cleaning import Cleaning


def command_job(job_class: type, argv: list[str], *wrappers):
    """The job a command made with job_command(job_class) (inside `wrappers`) receives for `argv`."""
    seen = {}
    local = typer.Typer()

    def run(job) -> None:
        seen["job"] = job

    command = job_command(job_class)(run)
    for wrap in wrappers:
        command = wrap(command)
    local.command()(command)
    result = CliRunner().invoke(local, argv)
    assert result.exit_code == 0, result.output
    return seen["job"]


def priming_records(job: PrimingJob) -> dict:
    """Output folder -> claim parameters, as written to disk (JSON: tuples become lists)."""
    return {str(target): json.loads(json.dumps({**vars(config), **job.cleaning.arguments()}))
            for target, config in priming_sets(job)}


PRIMING_DEFAULTS = {
    "answers": "correct", "batch_size": 64, "benchmarks_dir": None, "classifier": "cues_v11", "decontam": None,
    "dedup": False, "format_score": 0.0, "integer_division": True, "judge": None, "llm": None, "llm_oversample": 2.0,
    "max_attempts_factor": 20, "max_dead_ends": 3, "n_numbers": 4, "number_range": [1, 99],
    "placeholder_for": "all_strategies", "seed": 0, "target_range": [10, 100], "tokenizer": None, "writer": "symbolic",
}


def test_priming_records_what_it_recorded_before_its_job_preset_and_typed_options_included(tmp_path):
    out = str(tmp_path / "pr")
    two = command_job(PrimingJob, [
        "--variant", "all_strategies,negative_control", "--answers", "any", "--preset", "tinyzero", "--numbers", "3",
        "--format-score", "0.1", "--n", "10", "--test-n", "2", "--seed", "4", "--max-dead-ends", "2",
        "--fractional-division", "-o", out], typed_problem_space)
    shared = {**PRIMING_DEFAULTS, "answers": "any", "format_score": 0.1, "integer_division": False, "max_dead_ends": 2,
              "n": 10, "n_numbers": 3, "number_range": [1, 100], "seed": 4, "test_n": 2}
    variants = ("all_strategies", "negative_control")
    assert priming_records(two) == {f"{out}/{v}": {**shared, "variant": v} for v in variants}
    # Typed explicitly, a value equal to its default still overrides the preset; untyped, the preset's value is taken.
    typed_default = command_job(PrimingJob, ["--variant", "only_backtracking", "--preset", "tinyzero", "--numbers", "4",
                                             "--n", "6", "--test-n", "1", "-o", out], typed_problem_space)
    assert priming_records(typed_default)[out] == {**PRIMING_DEFAULTS, "n": 6, "test_n": 1, "n_numbers": 4,
                                                   "number_range": [1, 100], "variant": "only_backtracking"}
    llm = command_job(PrimingJob, [
        "--variant", "all_strategies", "--writer", "llm", "--model", "org/m", "--backend", "endpoint", "--endpoint-url",
        "http://llm:8000/v1", "--temperature", "0.5", "--max-trace-tokens", "256", "--concurrency", "2",
        "--judge-model", "org/j", "--n", "4", "--test-n", "1", "--dedup", "-o", out], typed_problem_space)
    server = {"backend": "endpoint", "concurrency": 2, "device": "auto", "endpoint_url": "http://llm:8000/v1"}
    assert priming_records(llm)[out] == {
        **PRIMING_DEFAULTS, "n": 4, "test_n": 1, "variant": "all_strategies", "writer": "llm", "dedup": True,
        "llm": {**server, "model": "org/m", "max_tokens": 256, "temperature": 0.5},
        "judge": {**server, "model": "org/j"}}

    # The flow: the same parameters give the same job, its set problem-space parameters overriding the preset.
    flow = PrimingParameters(variant="all_strategies,negative_control", answers="any", preset="tinyzero", numbers="3",
                             format_score=0.1, n=10, test_n=2, seed=4, max_dead_ends=2, fractional_division=True,
                             output=out)
    assert priming_records(flow.job()) == priming_records(two)
    assert priming_records(PrimingParameters(variant="only_backtracking", preset="tinyzero", numbers="4", n=6,
                                             test_n=1, output=out).job()) == priming_records(typed_default)
    # A job made in Python: the options that differ from their defaults override the preset.
    made = resolve_preset(PrimingJob(variant="x", output=out, preset="tinyzero", target_range="5,60",
                                     cleaning=Cleaning()))
    assert (made.numbers, made.number_range, made.target_range, made.preset) == ("3,4", "1,100", "5,60", None)
    assert {f.name for f in offered(PrimingJob)} - {"overwrite"} | {"cleaning", "llm_oversample", "server"} == set(
        PrimingParameters.model_fields)


def test_priming_refuses_a_wrong_option_before_claiming_the_output(tmp_path):
    for argv, message in ((["--variant", "bogus"], "unknown variant 'bogus'"),
                          (["--variant", "placeholder_cot"], "name a tokenizer"),
                          (["--variant", "empty_cot", "--numbers", "3,x"], "--numbers takes a size"),
                          (["--variant", "empty_cot", "--preset", "r1"], "unknown preset 'r1'")):
        refused = CliRunner().invoke(app, ["priming", *argv, "-o", str(tmp_path / "out")])
        assert refused.exit_code == 2 and message in refused.output, refused.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValidationError, match="--number-range takes LOW,HIGH"):
        PrimingParameters(variant="empty_cot", number_range="5", output=str(tmp_path / "out"))


@pytest.fixture
def tagged(tmp_path):
    """A tags folder with one attribute shard, and the corpus it names."""
    tags = tmp_path / "tags" / "cues_v9"
    tags.mkdir(parents=True)
    pq.write_table(pa.table({"id": ["a"]}), tags / "attributes_00000.parquet")
    return tags


CPT_DEFAULTS = {
    "behaviors": "verification,backtracking,subgoal_setting,backward_chaining", "benchmarks_dir": None,
    "decontam": None, "dedup": False, "domain_key": None, "id_key": "id", "length_bins": 10, "length_match": "best",
    "length_trim": 0.025, "license": "other", "max_doc_tokens": 3072, "max_new_tokens": 4096, "min_behaviors": 1,
    "min_count": 1, "model": None, "oversample": 2.0, "pack_format": "parquet", "pack_length": 4096,
    "require_solution": False, "rewrite": False, "rewrite_oversample": 1.25, "seed": 0, "solution_judge": "cues",
    "split": "train", "text_key": "text", "tokens": "2k", "tolerance": 0.01,
}


def test_cpt_and_its_flow_record_what_the_command_recorded_before_its_job(tagged, tmp_path):
    texts = f"{SAMPLE_CORPUS}/*.jsonl"
    common = {"tags": str(tagged), "texts": texts, "tokenizer": "tok"}
    argv = ["--tags", str(tagged), "--texts", texts, "--tokens", "2k", "--tokenizer", "tok", "--behaviors",
            "backtracking,verification", "-k", "1", "--seed", "3", "--tolerance", "0.05", "--length-bins", "4",
            "--length-match", "none", "--length-trim", "0.05", "--oversample", "1.5", "--pack-length", "256",
            "--pack-format", "memmap", "--license", "mit", "--dedup", "--require-solution", "--tasks", "2",
            "-o", str(tmp_path / "cpt")]
    job = command_job(CPTJob, argv)
    selected = {**CPT_DEFAULTS, **common, "behaviors": "backtracking,verification", "seed": 3, "tolerance": 0.05,
                "length_bins": 4, "length_match": "none", "length_trim": 0.05, "oversample": 1.5, "pack_length": 256,
                "pack_format": "memmap", "license": "mit", "dedup": True, "require_solution": True}
    assert job.record() == selected and job.executor.tasks == 2
    rewrite = command_job(CPTJob, ["--tags", str(tagged), "--texts", texts, "--tokens", "2k", "--tokenizer", "tok",
                                   "--rewrite", "--model", "org/m", "--backend", "endpoint", "--max-doc-tokens", "512",
                                   "--max-new-tokens", "256", "--concurrency", "2", "--rewrite-oversample", "1.5",
                                   "--domain-key", "topic", "--gpus-per-task", "1", "-o", str(tmp_path / "cpt")])
    assert rewrite.record() == {**CPT_DEFAULTS, **common, "rewrite": True, "model": "org/m", "max_doc_tokens": 512,
                                "max_new_tokens": 256, "rewrite_oversample": 1.5, "domain_key": "topic"}
    assert rewrite.runs_on.gpus_per_task == 1

    # The flow claims under the command's record (it recorded its own before), so each takes the other's dataset.
    flow = CPTParameters(tags=str(tagged), texts=texts, tokens="2k", tokenizer="tok", output=str(tmp_path / "cpt"),
                         behaviors="backtracking,verification", min_behaviors=1, seed=3, tolerance=0.05, length_bins=4,
                         length_match="none", length_trim=0.05, oversample=1.5, pack_length=256, pack_format="memmap",
                         license="mit", cleaning={"dedup": True}, require_solution=True, executor={"tasks": 2})
    assert flow.job().record() == job.record() and flow.job().executor == job.executor
    assert flow.job().corpus == job.corpus and flow.job().cleaning == job.cleaning
    # A flow that skips the export says so in its record: the command's datasets are always exported.
    skipped = CPTParameters(**common, tokens="2k", output=str(tmp_path / "cpt"), export=False).job().record()
    assert skipped == {**CPT_DEFAULTS, **common, "export": False}
    assert {f.name for f in offered(CPTJob)} - {"overwrite"} | {"texts", "text_key", "id_key", "split", "streaming",
                                                               "cleaning", "executor", "export", "server"} == set(
        CPTParameters.model_fields)


def test_cpt_refuses_a_wrong_option_before_claiming_the_output(tagged, tmp_path):
    base = ["cpt", "--tags", str(tagged), "--texts", f"{SAMPLE_CORPUS}/*.jsonl", "--tokens", "2k", "--tokenizer",
            "tok", "-o", str(tmp_path / "out")]
    for extra, message in ((["--gpus-per-task", "1"], "--gpus-per-task applies to --rewrite"),
                           (["--require-solution", "--solution-judge", "llm"], "--solution-judge llm needs --model"),
                           (["--rewrite"], "--rewrite needs --model"), (["--behaviors", "nope"], "nope"),
                           (["--pack-format", "npy"], "--pack-format must be parquet or memmap")):
        refused = CliRunner().invoke(app, [*base, *extra])
        assert refused.exit_code == 2 and message in refused.output, refused.output
    empty = tmp_path / "no-tags"
    empty.mkdir()
    refused = CliRunner().invoke(app, [*base[:2], str(empty), *base[3:]])
    assert refused.exit_code == 2 and "no attribute shards" in refused.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValidationError, match="needs --model"):
        CPTParameters(tags=str(tagged), texts=str(SAMPLE_CORPUS), tokens="2k", tokenizer="tok", output="out",
                      require_solution=True, solution_judge="llm")
    with pytest.raises(ValidationError, match="not the executor's"):
        CPTParameters(tags=str(tagged), texts=str(SAMPLE_CORPUS), tokens="2k", tokenizer="tok", output="out",
                      rewrite=True, model="m", executor={"gpus_per_task": 1})
