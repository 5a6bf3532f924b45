"""Every option has one home (issue 35 part 1): a job's own option is declared in its job, a group's option in its
group (curate.options), an option several jobs offer alike in SHARED_OPTIONS; and every flow takes every option its
command offers. Read from the job classes themselves, so a job added or changed later is checked too."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections import defaultdict

import pytest

import curate.builders.jobs
import curate.flows
import curate.handoff.jobs
import curate.pipelines.jobs
import curate.review.jobs
from curate.flows.common import JobParameters
from curate.options import (
    CLEANING,
    EXECUTOR,
    INPUT,
    SERVER,
    CleaningFields,
    InputFields,
    JudgeFields,
    SamplingFields,
    ServerFields,
    group,
    groups,
    offered,
    option,
)
from curate.pipelines.executor_options import ExecutorOptions

JOB_MODULES = (curate.pipelines.jobs, curate.builders.jobs, curate.handoff.jobs, curate.review.jobs)
GROUP_FIELDS = (ExecutorOptions, ServerFields, SamplingFields, JudgeFields, InputFields, CleaningFields)

# A job's own option spelt like a group's, and why it is the job's own and not the group's.
OWN_NOT_GROUP = {
    ("McqaJob", "--workers"): "processes checking answers with math-verify; mcqa runs no datatrove tasks",
    ("CPTJob", "--gpus-per-task"): "the GPUs of the rewrite's model servers, with cpt's help; handed to the executor",
    ("PrimingJob", "--temperature"): "the teacher's temperature (0.7); priming samples no policy",
    ("PrimingJob", "--judge-model"): "a judge on the writer's own server settings, with no --judge-backend",
    ("McqaJob", "--max-tokens"): "the rewrite's budget; mcqa samples no policy",
    ("McqaJob", "--input"): "repeatable multiple-choice sources in their own formats, not one corpus",
    ("MultihopJob", "--input"): "GSM8K-style problems read by their own reader, not a corpus",
    ("MultihopJob", "--id-key"): "the problem id that becomes each hop's source_id",
    ("VerifierAuditJob", "--id-key"): "a table's id column, default FILE/LINE",
    ("DedupJob", "--text-key"): "the field compared (default: question if present, else text)",
    ("DecontamJob", "--benchmarks-dir"): "decontam is the clean-up itself; its help names $CURATE_BENCHMARKS_DIR",
}
# Options that several jobs spell alike on purpose with the same words, each the job's own.
ALIKE_BY_WORDING = {
    "--seed": "each job seeds its own sampler",
    "--k": "samples per prompt of each job's own sampling, with its own default",
    "--limit": "tag and tag-llm each read at most this many documents per task",
    "--output": "each job's own output folder, described in the same words",
    "--tags": "the shards each job reads",
}
# Options that a flow takes as its own argument rather than a parameter.
FLOW_ARGUMENTS = {"overwrite": "the flow's own argument, as the command's --overwrite"}


def job_classes() -> list[type]:
    return [value for module in JOB_MODULES for value in vars(module).values()
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == module.__name__
            and (offered(value) or groups(value))]


def spelling(f: dataclasses.Field) -> tuple[str, ...]:
    """How the command line spells an option: its flags, else --FIELD-NAME; () for a positional argument."""
    if f.metadata["argument"]:
        return ()
    return f.metadata["flags"] or (f"--{f.name.replace('_', '-')}",)


def test_the_jobs_are_read():
    names = {job.__name__ for job in job_classes()}
    assert {"TagJob", "TagLLMJob", "BuildJob", "McqaJob", "PrimingJob", "CPTJob", "PassRateJob", "ReviewJob"} <= names
    assert len(names) >= 20


def group_redeclarations(jobs: list[type], allowed=OWN_NOT_GROUP) -> list[str]:
    """Each job option spelt like a group's option that is not that group's shared declaration."""
    declared_by_groups = {flag: (group_class.__name__, f) for group_class in GROUP_FIELDS for f in offered(group_class)
                          for flag in spelling(f)}
    twice = []
    for job in jobs:
        for f in offered(job):
            for flag in spelling(f)[:1]:
                if flag not in declared_by_groups or (job.__name__, flag) in allowed:
                    continue
                owner, declared = declared_by_groups[flag]
                if not (f.metadata.get("shared") and f.metadata.get("shared") == declared.metadata.get("shared")):
                    twice.append(f"{job.__name__}.{f.name} ({flag}) is {owner}'s option: compose the group")
    return twice


def alike_declarations(jobs: list[type], allowed=ALIKE_BY_WORDING) -> set[str]:
    """Options that two or more jobs declare with the same flags and help, outside SHARED_OPTIONS."""
    declarations = defaultdict(list)
    for job in jobs:
        for f in offered(job):
            if not f.metadata.get("shared"):
                declarations[(spelling(f) or (f.name,), f.metadata["help"])].append(job.__name__)
    return {f"{flags[0]}: {', '.join(names)}" for (flags, _), names in declarations.items()
            if len(names) > 1 and flags[0] not in allowed}


def test_no_job_declares_a_group_option_again():
    twice = group_redeclarations(job_classes())
    assert not twice, twice
    # The allowlist names only what is still there.
    present = {(job.__name__, flag) for job in job_classes() for f in offered(job) for flag in spelling(f)[:1]}
    assert set(OWN_NOT_GROUP) <= present, set(OWN_NOT_GROUP) - present


def test_no_option_is_declared_alike_by_two_jobs():
    """Two jobs declaring an option with the same flags and help declare one option twice: it belongs in
    SHARED_OPTIONS (shared()), or, where the words are alike on purpose, in ALIKE_BY_WORDING."""
    copied = alike_declarations(job_classes())
    assert not copied, copied


def test_the_checks_see_a_copied_declaration():
    """The checks above find what they look for: a job that re-declares --backend, and two jobs that copy one
    option; and, with their allowlists emptied, the jobs those lists excuse."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class CopyJob:
        backend: str = option("Where the model runs.", default="vllm")
        note: str = option("A note.", default="")
        server: ServerFields = group(SERVER)

    other = dataclasses.make_dataclass("OtherCopyJob", [("note", str, option("A note.", default=""))])
    assert group_redeclarations([CopyJob, other]) == [
        "CopyJob.backend (--backend) is ServerFields's option: compose the group"]
    assert alike_declarations([CopyJob, other]) == {"--note: CopyJob, OtherCopyJob"}
    excused = group_redeclarations(job_classes(), allowed={})
    assert len(excused) >= len(OWN_NOT_GROUP)
    assert {f"--{word}" for word in ("seed", "output")} <= {line.split(":")[0]
                                                          for line in alike_declarations(job_classes(), allowed={})}


def flow_models() -> dict[type, type]:
    """Job class -> the parameters model its flow is generated from (the most derived one)."""
    for module in pkgutil.iter_modules(curate.flows.__path__):
        importlib.import_module(f"curate.flows.{module.name}")
    models = {}

    def walk(model: type) -> None:
        for sub in model.__subclasses__():
            if getattr(sub, "job_class", None) is not None:
                models[sub.job_class] = sub
            walk(sub)

    walk(JobParameters)
    return models


CORPUS_PARAMETERS = {"text_key", "id_key", "split", "streaming"}


@pytest.mark.parametrize("job", sorted(flow_models(), key=lambda job: job.__name__), ids=lambda job: job.__name__)
def test_every_flow_takes_every_option_of_its_command(job):
    parameters = set(flow_models()[job].model_fields)
    missing = {f.name for f in offered(job)} - parameters - set(FLOW_ARGUMENTS)
    kinds = groups(job)
    for kind, name in ((EXECUTOR, "executor"), (CLEANING, "cleaning"), (SERVER, "server")):
        if kind in kinds and name not in parameters:
            missing.add(name)
    if INPUT in kinds:
        path = "texts" if kinds[INPUT].metadata["settings"].get("texts") else "input"
        missing |= ({path} | CORPUS_PARAMETERS) - parameters
    assert not missing, f"{job.__name__}'s flow lacks {sorted(missing)}"
    if SERVER in kinds:  # the flow's server takes every server option the command offers, and refuses the others
        server = flow_models()[job].model_fields["server"].annotation
        assert {f.name for f in offered(ServerFields)} <= set(server.model_fields)
