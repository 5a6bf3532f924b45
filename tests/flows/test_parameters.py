"""The flows' executor and cleaning parameters are made from the dataclasses the commands build (ExecutorOptions,
Cleaning): the same fields, the same checks, the same object handed to the builders. No Prefect run here."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest
from pydantic import ValidationError

from curate.errors import CurateError
from curate.flows.common import CleaningParameters, ExecutorParameters
from curate.flows.cpt import CPTParameters
from curate.flows.mcqa import McqaParameters
from curate.flows.tag import TagParameters
from curate.pipelines.cleaning import Cleaning
from curate.pipelines.executor_options import ExecutorOptions
from curate.pipelines.jobs import SAMPLE_GLOB


def test_the_parameters_have_the_fields_of_the_options_they_build():
    assert set(ExecutorParameters.model_fields) | {"env_command"} == {f.name for f in fields(ExecutorOptions)}
    assert set(CleaningParameters.model_fields) == {f.name for f in fields(Cleaning)}
    assert ExecutorParameters(kind="slurm", partition="cpu", dry_run=True).options() == ExecutorOptions(
        kind="slurm", partition="cpu", dry_run=True
    )
    assert CleaningParameters().options() == Cleaning()
    with pytest.raises(ValidationError, match="extra"):
        CleaningParameters(dedupe=True)  # a misspelt option is refused, not ignored
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        ExecutorParameters(cpus_per_task=0)
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        ExecutorParameters(tasks=0)
    with pytest.raises(CurateError, match="--workers must be at least 1"):
        ExecutorOptions(workers=0).validate()


def test_tasks_and_workers_given_flat_as_older_deployments_give_them_are_the_executors():
    nested = TagParameters(input=SAMPLE_GLOB, executor={"tasks": 4, "workers": 2})
    assert TagParameters(input=SAMPLE_GLOB, tasks=4, workers=2) == nested
    assert nested.job().executor == ExecutorOptions(tasks=4, workers=2)
    with pytest.raises(ValidationError, match="tasks: given both at the top level and in executor"):
        TagParameters(input=SAMPLE_GLOB, tasks=4, executor={"tasks": 4})
    # mcqa has no executor: its `workers` (processes checking answers) is its own parameter.
    assert McqaParameters(inputs=[SAMPLE_GLOB], output="out", workers=3).job().workers == 3


def test_a_flow_refuses_the_cleaning_its_command_refuses_with_the_same_message(tmp_path, shared_data):
    bench = tmp_path / "bench.jsonl"
    bench.write_text('{"problem": "What is 2 + 2?"}\n')
    good = {"dedup": True, "decontam": f"gsm8k,{bench}=problem", "benchmarks_dir": str(shared_data)}
    assert CleaningParameters(**good).options() == Cleaning(True, f"gsm8k,{bench}=problem", shared_data)
    for bad in (
        {"decontam": "no_such_benchmark"},
        {"decontam": "gsm8k", "benchmarks_dir": str(tmp_path)},
        {"benchmarks_dir": str(shared_data)},
        {"decontam": ","},
    ):
        with pytest.raises(CurateError) as refused:
            Cleaning(**bad).validate()
        with pytest.raises(ValidationError, match=re.escape(str(refused.value))):
            CleaningParameters(**bad)


def test_cpt_takes_the_cleaning_parameters_as_the_other_builders_do(tmp_path):
    with pytest.raises(ValidationError) as refused:
        CPTParameters(
            tags=str(tmp_path), texts=str(tmp_path), tokens="1k", tokenizer="t", output=str(tmp_path / "o"), dedup=True
        )
    assert "dedup" in str(refused.value) and "extra" in str(refused.value).lower()
    assert CPTParameters.model_fields["cleaning"].annotation is CleaningParameters
