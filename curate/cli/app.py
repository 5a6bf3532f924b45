"""The `curate` application and its console; commands register themselves from their modules."""

from __future__ import annotations

from typing import Annotated

import typer

from rich.console import Console

app = typer.Typer(
    help="Find cognitive behaviors (verification, backtracking, subgoal setting, backward chaining) in text "
    "and build the datasets that teach them.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


console = Console(stderr=True)


@app.callback()
def main(
    ctx: typer.Context,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also print datatrove's INFO log (each task's "
                                          "pipeline, files and stats); it is always kept under the run's _logs/.")] = False,
) -> None:
    """Find cognitive behaviors in text and build the datasets that teach them."""
    if not verbose:
        from curate.console import quiet_routine_logs

        ctx.call_on_close(quiet_routine_logs())

