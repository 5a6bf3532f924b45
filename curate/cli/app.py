"""The `curate` application and its console; commands register themselves from their modules."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from typing import Annotated

import click
import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from curate.cli.help_text import fit_examples
from curate.errors import CurateError

# Off a terminal (a log, a pipe, a scheduler's capture) a message stays one line: wrapped at rich's default 80
# columns, a long path moved the break into the words a reader greps for ("is up to date", "1 of 2 tasks").
console = Console(stderr=True, soft_wrap=not sys.stderr.isatty())

# Below this width typer's rich option table (seven columns: name, short, --no- name, type, help, ...) leaves the
# help column a dozen characters and cuts longer words ("only_backtracki…", "--fractional-d…"); a command's help
# is then printed by click's plain formatter instead, which wraps whole words.
RICH_HELP_MIN_COLUMNS = 140

# typer's own signals: its exit, abort and usage errors. typer 0.2x bundles its own click (typer._click), whose
# Exit and Abort are typer.Exit and typer.Abort (RuntimeErrors, so USER_ERRORS would swallow them as "error: ")
# and whose usage errors derive from typer.TyperException, not click's; older typer uses click's classes.
TYPER_SIGNALS = tuple(dict.fromkeys([
    typer.Exit, typer.Abort, getattr(typer, "TyperException", click.ClickException),
    click.exceptions.Exit, click.exceptions.Abort, click.ClickException,
]))

# What a command may raise for a reason the user can fix: curate's own errors, and the builtins that the
# libraries curate calls raise for a missing file or a malformed value (their messages name the file or value).
USER_ERRORS = (CurateError, OSError, ValueError, RuntimeError)


class CurateGroup(TyperGroup):
    """The one error runner: every command's errors are mapped here, once.

    A submitted Slurm job is not an error (exit 0, with what to do next); a `CurateError` or one of
    USER_ERRORS becomes one red line and exit 2; Ctrl-C or SIGTERM says how to resume and exits 130 (writers
    leave what they had not finished under `.partial` names, which the rerun replaces); anything else is a
    bug and keeps its traceback."""

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        columns = shutil.get_terminal_size().columns
        if command is not None and columns < RICH_HELP_MIN_COLUMNS:
            command.rich_markup_mode = None  # click's plain help: wraps at word boundaries, cuts nothing
            # ... and its examples, which it would rewrap too, are fitted to the width instead (cli/help_text.py).
            if command.help:
                command.authored_help = getattr(command, "authored_help", command.help)
                command.help = fit_examples(command.authored_help, columns)
        return command

    def invoke(self, ctx):
        previous = _terminate_as_interrupt()
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            console.print("[bold yellow]interrupted:[/] run the same command again to resume")
            raise typer.Exit(130) from None
        except TYPER_SIGNALS:
            raise  # typer's own exits and usage errors, handled by typer
        except USER_ERRORS as error:
            if _raised_while_interrupted(error):
                # `timeout` and schedulers signal the whole process group: a helper process (the local executor's
                # multiprocess manager) dies first, and the interrupt's unwinding then fails on its closed socket.
                console.print("[bold yellow]interrupted:[/] run the same command again to resume")
                raise typer.Exit(130) from None
            if isinstance(error, _job_submitted()):
                console.print(f"[yellow]{error}[/]")
                raise typer.Exit(0) from None
            # escape: a message's own brackets ("pip install 'curate[gpu]'") are text, not rich markup
            console.print(f"[bold red]error:[/] {escape(str(error))}", soft_wrap=True)  # one line at any terminal width
            raise typer.Exit(2) from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


def _raised_while_interrupted(error: BaseException) -> bool:
    """Whether `error` was raised while a KeyboardInterrupt (Ctrl-C, SIGTERM) was unwinding."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__context__
    return False


def _job_submitted() -> tuple[type, ...]:
    """JobSubmitted (a RuntimeError), if the module that raises it was loaded: a command that never loaded it cannot
    have raised it, and importing it (datatrove, ~0.5 s) for every command, `--help` included, made them all slow."""
    executors = sys.modules.get("curate.pipelines.executors")
    return (executors.JobSubmitted,) if executors is not None else ()


def _terminate_as_interrupt():
    """SIGTERM (a scheduler's kill, `kill PID`) unwinds like Ctrl-C in this process, so the same cleanup runs.
    Returns the handler it replaced (None off the main thread, where none can be set).

    Forked task processes get the default SIGTERM back: the local executor's pool stops its workers with SIGTERM
    at the end of every run, and a worker that turned it into an exception could die holding the pool's queue
    lock while another waits on it, so the run hung after its last task. A worker killed mid-task loses nothing:
    its writers have only `.partial` files, which the rerun replaces."""
    if threading.current_thread() is not threading.main_thread():
        return None
    global _CHILDREN_RESET
    if not _CHILDREN_RESET:
        os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
        _CHILDREN_RESET = True
    return signal.signal(signal.SIGTERM, signal.default_int_handler)


_CHILDREN_RESET = False  # os.register_at_fork cannot unregister: register the reset once per process


app = typer.Typer(
    cls=CurateGroup,
    help="Find cognitive behaviors (verification, backtracking, subgoal setting, backward chaining) in text "
    "and build the datasets that teach them.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


@app.callback()
def main(
    ctx: typer.Context,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also print datatrove's INFO log (each task's "
                                          "pipeline, files and stats); it is always kept under the run's _logs/.")] = False,
) -> None:
    """Find cognitive behaviors in text and build the datasets that teach them."""
    from curate.console import plain_progress_off_terminal

    plain_progress_off_terminal()
    if not verbose:
        from curate.console import quiet_routine_logs

        ctx.call_on_close(quiet_routine_logs())

