"""The executor options are declared once (curate.cli.groups) and reach every command that runs datatrove tasks."""

from __future__ import annotations

from dataclasses import fields

import typer.main
from typer.testing import CliRunner

from curate.cli import app
from curate.cli.groups import FLAGS
from curate.pipelines.executor_options import ExecutorOptions


def test_every_executor_option_has_a_flag():
    # env_command is derived from the running environment, not chosen by the user.
    assert set(FLAGS) | {"env_command"} == {f.name for f in fields(ExecutorOptions)}


def test_commands_that_run_tasks_show_the_executor_panel_and_validate_the_options(tmp_path):
    group = typer.main.get_command(app)
    runs_tasks = [name for name, command in group.commands.items()
                  if any("--slurm-partition" in p.opts for p in command.params)]
    assert set(runs_tasks) == {"tag", "tag-llm", "build", "dedup", "decontam", "cpt", "filter-passrate"}
    for name in runs_tasks:
        assert {p.rich_help_panel for p in group.commands[name].params if "--executor" in p.opts} == {"Executor"}
    result = CliRunner().invoke(app, ["tag", "--executor", "slurm", "--output", str(tmp_path / "tags")])
    assert result.exit_code == 2 and "needs --slurm-partition" in result.output
    assert not (tmp_path / "tags").exists()
