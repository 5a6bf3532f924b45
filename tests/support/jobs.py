"""The job a command receives: what the job tests (tests/cli) pin for an argv."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from curate.cli.groups import job_command


def job_from(job_class: type, argv: list[str]):
    """The job a command made with job_command(job_class) receives for `argv`."""
    seen = {}
    local = typer.Typer()

    @local.command()
    @job_command(job_class)
    def run(job) -> None:
        seen["job"] = job

    result = CliRunner().invoke(local, argv)
    assert result.exit_code == 0, result.output
    return seen["job"]
