"""The tag flow: one Prefect task around the tag job (corpus -> attribute shards in OUTPUT/<classifier>/), the job
`curate tag` runs, with the same options: a cheap classifier, or an LLM one on the job's model server."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from curate.flows.common import InputParameters, cache_key, job_model, job_task, submission_summary
from curate.pipelines.executors import JobSubmitted
from curate.pipelines.jobs import TagJob
from curate.pipelines.query import behavior_stats, count_rejects
from curate.pipelines.tag import unfinished_tasks
from curate.pipelines.tagging import llm_options, tag

TagParameters = job_model(
    TagJob,
    """The options of `curate tag`, generated from its TagJob; the corpus as InputParameters has it.""",
    __name__,
    base=InputParameters,
    check=llm_options,
)


def _tag_key(context, arguments: dict) -> str:
    return cache_key("tag", arguments["params"])


@task(name="tag-corpus", cache_key_fn=_tag_key, persist_result=True)
def tag_corpus(params: TagParameters) -> dict:
    try:
        result = tag(params.job(), progress=False)
    except JobSubmitted as submitted:
        return submission_summary(submitted)
    stats = behavior_stats(result.tags_dir)[0]
    return {
        "tags_dir": str(result.tags_dir), "classifier": result.classifier, "documents": stats.documents,
        "errors": stats.errors, "present": stats.present, "rejects": count_rejects(result.rejects_dir),
    }


@flow(name="tag", log_prints=True)
def tag_flow(params: TagParameters) -> dict:
    """Tag a corpus with a behavior classifier; a rerun with the same inputs and classifier is served from cache."""
    tags_dir = Path(params.output) / params.resolved_classifier
    # Tags are finished by the rule `build` and `stats` apply to them: every task of every generation completed.
    unfinished, tasks = unfinished_tasks(tags_dir)
    summary = job_task(tag_corpus, remote=params.reads_remote, finished=tasks > 0 and not unfinished)(params)
    if "submitted" in summary:
        get_run_logger().info("%s", summary["submitted"])
    else:
        get_run_logger().info("tagged %s documents into %s", summary["documents"], summary["tags_dir"])
    return summary
