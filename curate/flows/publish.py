"""The publish flow: validate a dataset directory, then push it to the Hugging Face Hub.

Only the push does remote I/O, so only it retries. The token is read from HF_TOKEN inside the task:
flow parameters are stored in Prefect's database and shown in its UI, so a token must never be one.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from prefect import flow, get_run_logger, task

from curate.flows.common import cache_key, job_model
from curate.handoff.jobs import PublishJob
from curate.handoff.publish import UploadError, check_publish, publish, validate_dataset

UPLOAD_RETRIES = 3
UPLOAD_RETRY_DELAYS = [10, 60, 300]

PublishParameters = job_model(
    PublishJob,
    """The options of `curate publish`, generated from its PublishJob.""",
    __name__,
    check=check_publish,
)


def _content_signature(directory: Path, files: list[dict]) -> list:
    return [[f["path_in_repo"], f["size"], (directory / f["path_in_repo"]).stat().st_mtime_ns] for f in files]


def _push_key(context, arguments: dict) -> str:
    params: PublishParameters = arguments["params"]
    return cache_key("publish", params, _content_signature(Path(params.directory), arguments["files"]))


@task(name="validate-dataset")
def validate(params: PublishParameters) -> list[dict]:
    plan = validate_dataset(params.directory, include_rejects=params.include_rejects)
    return [asdict(f) for f in plan.files]


def _worth_retrying(task, task_run, state) -> bool:
    return isinstance(state.data, UploadError) and state.data.transient


@task(name="push-to-hub", retries=UPLOAD_RETRIES, retry_delay_seconds=UPLOAD_RETRY_DELAYS,
      retry_condition_fn=_worth_retrying, cache_key_fn=_push_key, persist_result=True)
def push(params: PublishParameters, files: list[dict]) -> dict:
    """Validates again (the directory may have changed since) and uploads one commit."""
    result = publish(params.job())
    return {"repo_id": result.repo_id, "commit_url": result.commit_url, "files": len(result.plan.files),
            "bytes": result.plan.total_bytes, "deleted": result.deleted}


@flow(name="publish", log_prints=True)
def publish_flow(params: PublishParameters) -> dict:
    """Validate a dataset and push it to the Hub (or, with dry_run, list what would be uploaded)."""
    logger = get_run_logger()
    files = validate(params)
    logger.info("%s: %d files, %d bytes", params.directory, len(files), sum(f["size"] for f in files))
    if params.dry_run:
        for f in files:
            logger.info("would upload %s (%d bytes)", f["path_in_repo"], f["size"])
        return {"repo_id": params.repo_id, "dry_run": True, "files": files}
    summary = push(params, files)
    logger.info("published %s: %s", summary["repo_id"], summary["commit_url"])
    return summary
