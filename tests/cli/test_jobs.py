"""One job per command (issue 16 part 4): the command's options are generated from its job dataclass, the command
gets one job, and the output claim records what every earlier `curate build` recorded for the same options (else
a rerun would refuse an existing dataset as another one)."""

from __future__ import annotations

import shutil

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from curate.builders.jobs import BuildJob, McqaJob, MultihopJob
from curate.builders.mcqa import output_identity
from curate.cli import SAMPLE_CORPUS, app
from curate.cli.groups import SERVER_FLAGS
from curate.flows.build import BuildParameters
from curate.flows.common import ServerParameters
from curate.flows.curate_pipeline import PipelineParameters
from curate.flows.export import ExportParameters
from curate.flows.mcqa import McqaParameters
from curate.flows.multihop import MultihopParameters
from curate.flows.tag import TagParameters
from curate.handoff.jobs import ExportJob, PassRateJob
from curate.handoff.passrate import claim_record
from curate.options import offered
from curate.pipelines.cleaning import Cleaning
from curate.pipelines.executor_options import ExecutorOptions
from curate.pipelines.jobs import DecontamJob, DedupJob, TagJob, TagLLMJob
from curate.pipelines.state import folder_signature
from curate.pipelines.tagging import llm_options
from tests.support.jobs import job_from


def test_build_records_what_it_recorded_before_its_job(tmp_path):
    shutil.copytree(SAMPLE_CORPUS, tmp_path / "corpus")
    bench = tmp_path / "bench.jsonl"
    bench.write_text('{"question": "What is 1 + 1?"}\n')
    argv = ["--behaviors", "backtracking,verification", "--input", f"{tmp_path}/corpus/*.jsonl", "-o", str(tmp_path / "ds"),
            "--tags", str(tmp_path / "tags"), "--min-count", "2", "--exclude-behaviors", "subgoal", "--limit", "5",
            "--seed", "3", "--license", "mit", "--keep-columns", "topic, style", "--dedup", "--decontam",
            f"{bench}=question", "-c", "cues_v6", "--tasks", "2", "--executor", "slurm", "--slurm-partition", "cpu"]
    job = job_from(BuildJob, argv)
    assert (job.executor, job.cleaning) == (
        ExecutorOptions(tasks=2, kind="slurm", partition="cpu"), Cleaning(dedup=True, decontam=f"{bench}=question"))
    # The parameters `curate build` wrote into OUTPUT/.curate-output.json for these options before the job (e6b7a11).
    assert job.record() == {
        "behaviors": "backtracking,verification", "input": f"{tmp_path}/corpus/*.jsonl", "tags": str(tmp_path / "tags"),
        "classifier": "cues_v6", "min_count": 2, "exclude_behaviors": "subgoal", "limit": 5, "seed": 3,
        "text_key": "text", "id_key": "id", "split": "train", "streaming": False, "license": "mit", "dedup": True,
        "decontam": f"{bench}=question", "benchmarks_dir": None, "keep_columns": ["topic", "style"],
    }
    # The quickstart: the bundled sample is recorded as no --input, and no --keep-columns as no key at all.
    quickstart = job_from(BuildJob, ["--behaviors", "backtracking"])
    assert quickstart.record() == {
        "behaviors": "backtracking", "input": None, "tags": None, "classifier": "cues", "min_count": 1,
        "exclude_behaviors": None, "limit": None, "seed": 0, "text_key": "text", "id_key": "id", "split": "train",
        "streaming": False, "license": "other", "dedup": False, "decontam": None, "benchmarks_dir": None,
    }
    assert str(quickstart.dataset_dir) == "datasets/backtracking"


def test_the_build_flow_takes_every_option_of_the_command():
    # --overwrite is the flow's own argument; the corpus, executor and cleaning options are its groups' parameters.
    own = {f.name for f in offered(BuildJob)} - {"overwrite"}
    assert own | {"input", "text_key", "id_key", "split", "config", "streaming", "batch_size", "executor",
                  "cleaning"} == set(BuildParameters.model_fields)
    # A flow's paths stay strings, as deployments give them: the pipeline hands its tags root on to the tag flow.
    pipeline = PipelineParameters(input=str(SAMPLE_CORPUS), output="ds", behaviors="backtracking", tags="shared/tags")
    assert pipeline.tag_parameters().output == pipeline.build_parameters().tags == "shared/tags"


def test_the_tag_flow_runs_an_llm_classifier_as_curate_tag_does(tmp_path):
    # The flow takes the command's model-server options, so both tag through the same LLM tagging options.
    argv = ["--input", str(SAMPLE_CORPUS), "-o", str(tmp_path / "tags"), "-c", "llm", "--model", "org/model",
            "--backend", "endpoint", "--endpoint-url", "http://llm:8000/v1", "--concurrency", "3", "--mode", "joint",
            "--server-arg", "max-num-seqs=8", "--max-doc-tokens", "512", "--gpus-per-task", "1"]
    command = job_from(TagJob, argv)
    flow = TagParameters(input=str(SAMPLE_CORPUS), output=str(tmp_path / "tags"), classifier="llm", model="org/model",
                         mode="joint", max_doc_tokens=512, executor={"gpus_per_task": 1},
                         server={"backend": "endpoint", "endpoint_url": "http://llm:8000/v1", "concurrency": 3,
                                 "server_args": {"max-num-seqs": "8"}}).job()
    assert llm_options(command) == llm_options(flow)
    assert (llm_options(command).model, llm_options(command).request_timeout) == ("org/model", 300.0)
    assert command.executor == flow.executor
    # What the command does not offer (tag's parallelism follows --gpus-per-task), the flow refuses.
    with pytest.raises(ValidationError, match="tp is not an option"):
        TagParameters(input=str(SAMPLE_CORPUS), server={"tp": 2})
    assert set(ServerParameters.model_fields) == set(SERVER_FLAGS)  # a flow's server parameters are the panel's
    assert {f.name for f in offered(TagJob)} | {"input", "text_key", "id_key", "split", "config", "streaming",
                                               "executor", "server"} == set(TagParameters.model_fields)


def test_dedup_and_decontam_record_what_they_recorded_before_their_jobs(tmp_path):
    dedup = job_from(DedupJob, ["data/x", "-o", str(tmp_path / "out"), "--threshold", "0.8", "--text-key", "question",
                                "--executor", "slurm", "--slurm-partition", "cpu"])
    assert (dedup.input, dedup.executor.partition) == ("data/x", "cpu")
    assert dedup.record() == {"input": "data/x", "threshold": 0.8, "ngrams": 5, "text_key": "question", "id_key": "id"}
    decontam = job_from(DecontamJob, ["data/x", "--against", "gsm8k", "-o", str(tmp_path / "out"), "--fields",
                                      "question, answer", "--benchmarks-dir", "../shared/data", "--ngrams", "8"])
    assert decontam.field_list == ["question", "answer"]
    assert decontam.record() == {"input": "data/x", "against": "gsm8k", "fields": "question, answer", "ngrams": 8,
                                 "short_min_words": 4, "benchmarks_dir": "../shared/data", "id_key": "id"}


def test_export_refuses_what_its_flow_refuses(tmp_path):
    # One check for both: the dataset itself as the output (which --overwrite would have emptied) fails in one line.
    (tmp_path / "ds" / "data").mkdir(parents=True)
    result = CliRunner().invoke(app, ["export", str(tmp_path / "ds"), "--to", "sft", "-o", str(tmp_path / "ds"),
                                      "--overwrite"])
    assert result.exit_code == 2 and "must not be the dataset itself" in result.output
    assert (tmp_path / "ds" / "data").is_dir()
    with pytest.raises(ValidationError, match="must not be the dataset itself"):
        ExportParameters(dataset=str(SAMPLE_CORPUS), to="sft", output=str(SAMPLE_CORPUS))
    assert {f.name for f in offered(ExportJob)} - {"overwrite"} == set(ExportParameters.model_fields)


def test_filter_passrate_records_what_it_recorded_before_its_job(tmp_path):
    (tmp_path / "ds" / "data").mkdir(parents=True)
    (tmp_path / "ds" / "data" / "train-00000.parquet").write_bytes(b"rows")
    job = job_from(PassRateJob, ["--dataset", str(tmp_path / "ds"), "--model", "org/policy", "-o", str(tmp_path / "pr"),
                                 "--k", "4", "--band", "0.1,0.9", "--temperature", "0.7", "--server-arg", "enforce-eager",
                                 "--server-arg", "max-num-seqs=8", "--instruction", "", "--tasks", "2"])
    assert (job.server.model, job.server.k, job.server.instruction) == ("org/policy", 4, "")
    assert claim_record(job) == {
        "dataset": str((tmp_path / "ds").resolve()), "dataset_contents": folder_signature(tmp_path / "ds"),
        "model": "org/policy", "k": 4, "backend": "transformers", "endpoint_url": None, "temperature": 0.7,
        "top_p": 1.0, "max_tokens": 1024, "instruction": "", "system": None,
        "server_arg": ["enforce-eager", "max-num-seqs=8"], "limit": -1,
    }


def test_tag_llm_hands_its_tagging_options_to_the_server_config(tmp_path):
    job = job_from(TagLLMJob, ["--model", "org/model", "--input", str(SAMPLE_CORPUS), "--tp", "2", "--mode", "joint",
                               "--gate", "cues", "--records-per-chunk", "50", "--chat-template-kwargs", "{}"])
    assert (job.server.model, job.server.tp, job.server.mode, job.server.gate, job.server.records_per_chunk) == (
        "org/model", 2, "joint", "cues", 50)
    refused = CliRunner().invoke(app, ["tag-llm", "--model", "m", "--input", str(SAMPLE_CORPUS), "-o",
                                       str(tmp_path / "tags"), "--chat-template-kwargs", "[1]"])
    assert refused.exit_code == 2 and "must be a JSON object" in refused.output
    assert not (tmp_path / "tags").exists()


def test_multihop_records_what_it_recorded_before_its_job(tmp_path):
    problems = tmp_path / "gsm8k.jsonl"
    problems.write_text('{"question": "Q", "answer": "1+1=<<1+1=2>>2\\n#### 2"}\n')
    bench = tmp_path / "bench.jsonl"
    bench.write_text('{"question": "What is 1 + 1?"}\n')
    argv = ["-i", str(problems), "-o", str(tmp_path / "mh"), "--n", "30", "--hops", "3", "--seed", "2", "--max-ratio",
            "5", "--tries-per-link", "32", "--license", "cc-by", "--dedup", "--decontam", f"{bench}=question",
            "--benchmarks-dir", str(tmp_path)]
    job = job_from(MultihopJob, argv)
    # The parameters `curate multihop` wrote into OUTPUT/.curate-output.json for these options before the job.
    assert job.record() == {
        "input": str(problems), "hops": "3", "n": 30, "seed": 2, "max_ratio": 5.0, "tries_per_link": 32,
        "question_key": "question", "answer_key": "answer", "id_key": "id", "split": "train", "license": "cc-by",
        "dedup": True, "decontam": f"{bench}=question", "benchmarks_dir": str(tmp_path),
    }
    # The flow's parameters are the command's options: the same job, hence the same claim.
    flow = MultihopParameters(input=str(problems), output=str(tmp_path / "mh"), n=30, hops="3", seed=2, max_ratio=5,
                              tries_per_link=32, license="cc-by",
                              cleaning={"dedup": True, "decontam": f"{bench}=question", "benchmarks_dir": str(tmp_path)})
    assert flow.job().record() == job.record()
    assert {f.name for f in offered(MultihopJob)} - {"overwrite"} | {"cleaning"} == set(MultihopParameters.model_fields)
    with pytest.raises(ValidationError, match="--hops '9'"):
        MultihopParameters(input=str(problems), output="mh", hops="9")
    missing = CliRunner().invoke(app, ["multihop", "-i", f"{tmp_path}/none/*.jsonl", "-o", str(tmp_path / "out")])
    assert missing.exit_code == 2 and "No files found" in missing.output and not (tmp_path / "out").exists()


def test_mcqa_records_what_it_recorded_before_its_job(tmp_path):
    items = tmp_path / "aqua.json"
    items.write_text('{"question": "1 + 1?", "options": ["A)2", "B)3"], "correct": "A"}\n')
    argv = ["-i", str(items), "-i", "hf:org/mc:test", "-o", str(tmp_path / "mc"), "--limit", "5", "--reformulate",
            "--model", "org/m", "--backend", "endpoint", "--endpoint-url", "http://llm:8000/v1", "--max-tokens", "512",
            "--concurrency", "2", "--dedup"]
    job = job_from(McqaJob, argv)
    what, inputs = output_identity(job)
    # The parameters `curate mcqa` wrote into OUTPUT/.curate-output.json for these options before the job.
    assert what == {
        "inputs": [str(items), "hf:org/mc:test"], "format": "auto", "limit": 5, "dedup": True, "decontam": None,
        "benchmarks_dir": None, "reformulate": {
            "backend": "endpoint", "chat_template_kwargs": None, "concurrency": 2, "device": "auto", "dp": 1,
            "endpoint_url": "http://llm:8000/v1", "max_model_len": None, "max_tokens": 512, "model": "org/m",
            "reasoning_parser": None, "request_timeout": 600.0, "server_args": {}, "server_start_retries": None,
            "server_start_timeout": None, "temperature": 0.0, "tp": 1}}
    assert inputs[1] == "hf:org/mc:test" and inputs[0][0][0] == str(items)
    flow = McqaParameters(inputs=[str(items), "hf:org/mc:test"], output=str(tmp_path / "mc"), limit=5,
                          reformulate=True, model="org/m", max_tokens=512, cleaning={"dedup": True},
                          server={"backend": "endpoint", "endpoint_url": "http://llm:8000/v1", "concurrency": 2}).job()
    assert flow.llm == job.llm and (flow.inputs, flow.cleaning) == (job.inputs, job.cleaning)
    assert {f.name for f in offered(McqaJob)} - {"overwrite"} | {"cleaning", "server"} == set(McqaParameters.model_fields)
    # Refused before anything is claimed, by the command and the flow alike.
    refused = CliRunner().invoke(app, ["mcqa", "-i", str(items), "--model", "m", "-o", str(tmp_path / "out")])
    assert refused.exit_code == 2 and "--model applies to --reformulate only" in refused.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValidationError, match="needs --model"):
        McqaParameters(inputs=[str(items)], output="out", reformulate=True)
