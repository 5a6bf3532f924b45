"""The whole job as one flow: tag -> build -> export -> publish, each step its own (cached) subflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from prefect import flow
from pydantic import Field, model_validator

from curate.flows.build import BuildParameters, build_flow
from curate.flows.common import one_of
from curate.flows.export import ExportParameters, export_flow
from curate.flows.publish import PublishParameters, publish_flow
from curate.flows.tag import TagParameters, tag_flow
from curate.handoff.export import TARGETS


class PipelineParameters(BuildParameters):
    export_to: Annotated[str | None, one_of("export target", TARGETS)] = Field(None, description="Export the dataset for a trainer (verl|trl|openrlhf|sft|cpt); omit to skip.")
    export_output: str | None = Field(None, description="Export directory (default: OUTPUT-<target>).")
    repo_id: str | None = Field(None, description="Publish to this Hub dataset repo (ORG/NAME); omit to skip.")
    publish: Literal["dataset", "export"] = Field("dataset", description="Which directory to publish.")
    private: bool = True
    dry_run: bool = False
    endpoint: str | None = None

    @model_validator(mode="after")
    def _publishable(self):
        if self.publish == "export" and not self.export_to:
            raise ValueError("publish='export' needs export_to")
        if self.export_to and Path(self.export_directory).resolve() == Path(self.output).resolve():
            raise ValueError("export_output must not be the dataset directory")
        if self.repo_id:
            self.publish_parameters()
        return self

    @property
    def tags_root(self) -> str:
        return self.tags or str(Path(self.output) / "tags")

    @property
    def export_directory(self) -> str:
        return self.export_output or f"{self.output.rstrip('/')}-{self.export_to}"

    def tag_parameters(self) -> TagParameters:
        shared = self.model_dump(include=set(TagParameters.model_fields) - {"output", "limit"})
        return TagParameters(**shared, output=self.tags_root)

    def build_parameters(self) -> BuildParameters:
        return BuildParameters(**self.model_dump(include=set(BuildParameters.model_fields) - {"tags"}), tags=self.tags_root)

    def export_parameters(self) -> ExportParameters:
        """Only once the dataset is built: export parameters check that its files exist."""
        return ExportParameters(dataset=self.output, to=self.export_to, output=self.export_directory)

    def publish_parameters(self) -> PublishParameters:
        directory = self.export_directory if self.publish == "export" else self.output
        return PublishParameters(directory=directory, repo_id=self.repo_id, private=self.private,
                                 dry_run=self.dry_run, endpoint=self.endpoint)


@flow(name="curate-pipeline", log_prints=True)
def curate_pipeline(params: PipelineParameters) -> dict:
    """Tag a corpus, build a dataset from the tags, export it for a trainer and, given a repo_id, publish it."""
    result = {"tag": tag_flow(params.tag_parameters())}
    result["build"] = build_flow(params.build_parameters())
    if params.export_to:
        result["export"] = export_flow(params.export_parameters())
    if params.repo_id:
        result["publish"] = publish_flow(params.publish_parameters())
    return result
