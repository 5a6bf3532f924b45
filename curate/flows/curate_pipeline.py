"""The whole job as one flow: tag -> build -> publish, each step its own (cached) subflow.

There is no export step yet: the chain grows as builders and exports land in curate/pipelines.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from pydantic import Field, model_validator

from curate.flows.build import BuildParameters, build_flow
from curate.flows.publish import PublishParameters, publish_flow
from curate.flows.tag import TagParameters, tag_flow


class PipelineParameters(BuildParameters):
    repo_id: str | None = Field(None, description="Publish to this Hub dataset repo (ORG/NAME); omit to skip.")
    private: bool = True
    dry_run: bool = False
    endpoint: str | None = None

    @model_validator(mode="after")
    def _publishable(self):
        if self.repo_id:
            self.publish_parameters()
        return self

    @property
    def tags_root(self) -> str:
        return self.tags or str(Path(self.output) / "tags")

    def tag_parameters(self) -> TagParameters:
        shared = self.model_dump(include=set(TagParameters.model_fields) - {"output", "limit"})
        return TagParameters(**shared, output=self.tags_root)

    def build_parameters(self) -> BuildParameters:
        return BuildParameters(**self.model_dump(include=set(BuildParameters.model_fields) - {"tags"}), tags=self.tags_root)

    def publish_parameters(self) -> PublishParameters:
        return PublishParameters(directory=self.output, repo_id=self.repo_id, private=self.private,
                                 dry_run=self.dry_run, endpoint=self.endpoint)


@flow(name="curate-pipeline", log_prints=True)
def curate_pipeline(params: PipelineParameters) -> dict:
    """Tag a corpus, build a dataset from the tags and, given a repo_id, publish it."""
    result = {"tag": tag_flow(params.tag_parameters())}
    result["build"] = build_flow(params.build_parameters())
    if params.repo_id:
        result["publish"] = publish_flow(params.publish_parameters())
    return result
