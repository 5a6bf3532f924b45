"""The publish flow: validate a dataset directory, then push it to the Hugging Face Hub.

Only the push does remote I/O, so only it retries. The token is read from HF_TOKEN inside the task:
flow parameters are stored in Prefect's database and shown in its UI, so a token must never be one.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from pydantic import BaseModel, ConfigDict, Field, field_validator

from curate.flows.common import cache_key
from curate.handoff.publish import REPO_ID, UploadError, publish, validate_dataset

UPLOAD_RETRIES = 3
UPLOAD_RETRY_DELAYS = [10, 60, 300]


class PublishParameters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    directory: str = Field(min_length=1, description="A built dataset: data files + README.md card.")
    repo_id: str = Field(description="Dataset repo on the Hub, ORG/NAME.")
    private: bool = False
    dry_run: bool = Field(False, description="Validate and list what would be uploaded; upload nothing.")
    include_rejects: bool = True
    endpoint: str | None = Field(None, description="Hub endpoint (default: HF_ENDPOINT or huggingface.co).")
    commit_message: str | None = None

    @field_validator("repo_id")
    @classmethod
    def _repo_id(cls, value: str) -> str:
        if not REPO_ID.match(value):
            raise ValueError(f"repo_id {value!r} is not of the form ORG/NAME")
        return value


def _content_signature(directory: Path, files: list[dict]) -> list:
    return [[f["path_in_repo"], f["size"], (directory / f["path_in_repo"]).stat().st_mtime_ns] for f in files]


def _push_key(context, arguments: dict) -> str:
    params: PublishParameters = arguments["params"]
    return cache_key("publish", params, _content_signature(Path(params.directory), arguments["files"]))


@task(name="validate-dataset")
def validate(params: PublishParameters) -> list[dict]:
    from dataclasses import asdict


    plan = validate_dataset(params.directory, include_rejects=params.include_rejects)
    return [asdict(f) for f in plan.files]


def _worth_retrying(task, task_run, state) -> bool:
    return isinstance(state.data, UploadError) and state.data.transient


@task(name="push-to-hub", retries=UPLOAD_RETRIES, retry_delay_seconds=UPLOAD_RETRY_DELAYS,
      retry_condition_fn=_worth_retrying, cache_key_fn=_push_key, persist_result=True)
def push(params: PublishParameters, files: list[dict]) -> dict:
    """Validates again (the directory may have changed since) and uploads one commit."""
    result = publish(params.directory, params.repo_id, private=params.private, include_rejects=params.include_rejects,
                     endpoint=params.endpoint, commit_message=params.commit_message)
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
