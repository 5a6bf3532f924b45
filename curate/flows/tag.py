"""The tag flow: one Prefect task around `run_tagging` (corpus -> attribute shards in OUTPUT/<classifier>/)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from pydantic import Field

from curate.flows.common import InputParameters, cache_key, completed_tasks, submission_summary
from curate.pipelines.executors import JobSubmitted
from curate.pipelines.query import behavior_stats, count_rejects
from curate.pipelines.tag import run_tagging


class TagParameters(InputParameters):
    output: str = Field("tags", min_length=1, description="Tags root; shards go to OUTPUT/<classifier>/.")
    limit: int = Field(-1, ge=-1, description="Read at most this many documents per task (-1: all).")


def _tag_key(context, arguments: dict) -> str:
    return cache_key("tag", arguments["params"])


@task(name="tag-corpus", cache_key_fn=_tag_key, persist_result=True)
def tag_corpus(params: TagParameters) -> dict:
    try:
        result = run_tagging(params.spec(), params.output, params.classifier, tasks=params.tasks,
                             workers=params.workers, batch_size=params.batch_size, progress=False, limit=params.limit,
                             verify_inputs=params.verify_inputs, executor=params.executor.options())
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
    finished = completed_tasks(tags_dir / "_logs") >= params.tasks
    # Streaming from the Hub is remote I/O: retry it. A local corpus fails the same way twice.
    run = tag_corpus.with_options(refresh_cache=not finished, retries=2 if params.reads_remote else 0,
                                  retry_delay_seconds=30)
    summary = run(params)
    if "submitted" in summary:
        get_run_logger().info("%s", summary["submitted"])
    else:
        get_run_logger().info("tagged %s documents into %s", summary["documents"], summary["tags_dir"])
    return summary
