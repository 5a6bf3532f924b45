"""The `curate` application and its console; commands register themselves from their modules."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
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
# Exit and Abort are typer.Exit and typer.Abort (RuntimeErrors, which an older USER_ERRORS swallowed as "error: ")
# and whose usage errors derive from typer.TyperException, not click's; older typer uses click's classes.
TYPER_SIGNALS = tuple(dict.fromkeys([
    typer.Exit, typer.Abort, getattr(typer, "TyperException", click.ClickException),
    click.exceptions.Exit, click.exceptions.Abort, click.ClickException,
]))

# What a command may raise for a reason the user can fix: curate's own errors (bad options, bad input files, a
# missing model, a server that does not answer: curate/errors.py), and OSError, which the filesystem and the
# libraries curate calls raise for a missing file, a refused permission or a full disk (their messages name the
# file). Any other exception, a plain ValueError or RuntimeError included, is a bug and keeps its traceback.
USER_ERRORS = (CurateError, OSError)

# A write that failed for want of space: the disk is full, or the user's quota is.
DISK_FULL = {errno.ENOSPC, errno.EDQUOT}


class CurateGroup(TyperGroup):
    """The one error runner: every command's errors are mapped here, once.

    A submitted Slurm job is not an error (exit 0, with what to do next); a `CurateError` or an OSError
    (USER_ERRORS) becomes one red line and exit 2, a full disk's naming the folder and how to resume; Ctrl-C or
    SIGTERM says how to resume and exits 130 (writers leave what they had not finished under `.partial` names,
    which the rerun replaces); anything else is a bug and keeps its traceback."""

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        ctx.meta[COMMAND_LINE] = (name, command, list(rest))  # read again when a full disk needs the --output
        return name, command, rest

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
        except Exception as error:
            if _raised_while_interrupted(error):
                # `timeout` and schedulers signal the whole process group: a helper process (the local executor's
                # multiprocess manager) dies first, and the interrupt's unwinding then fails on its closed socket.
                console.print("[bold yellow]interrupted:[/] run the same command again to resume")
                raise typer.Exit(130) from None
            if isinstance(error, _job_submitted()):
                console.print(f"[yellow]{error}[/]")
                raise typer.Exit(0) from None
            if not isinstance(error, USER_ERRORS):
                raise  # a bug: Python's traceback says where
            message = _disk_full_message(error, ctx) if _disk_full(error) else str(error)
            # escape: a message's own brackets ("pip install 'curate[gpu]'") are text, not rich markup
            console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)  # one line at any terminal width
            raise typer.Exit(2) from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


COMMAND_LINE = "curate.command_line"  # ctx.meta key: the command's name, its click command and its arguments
# The options whose folders a command writes to or reads from, checked for the full disk when the error names no file.
FOLDER_OPTIONS = ("output", "tags", "dir", "folder", "input", "path")


def _disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in DISK_FULL


def _disk_full_message(error: OSError, ctx: click.Context) -> str:
    """A full disk's one line: the folder whose disk is full and how to resume. The folder is the one the failed
    write named; a writer's error names none (pyarrow, fsspec), so it is, of the folders the command was given and
    the temporary folder, the one whose disk has the least space left, the first given (--output) on a tie."""
    candidates = [Path(error.filename).parent] if error.filename else []
    candidates += _folders_given(ctx) + [Path(tempfile.gettempdir())]
    full = min(candidates, key=_free_bytes)
    return (f"no space left on the disk that holds {full} ({error.strerror}). Free space there and run the same command "
            "again to resume: finished tasks are kept, and files left unfinished under .partial names are replaced.")


def _folders_given(ctx: click.Context) -> list[Path]:
    """The values of the command's folder options (FOLDER_OPTIONS), --output first, parsed again from its arguments."""
    if COMMAND_LINE not in ctx.meta:
        return []
    name, command, args = ctx.meta[COMMAND_LINE]
    try:
        params = command.make_context(name, list(args), parent=ctx, resilient_parsing=True).params
    except TYPER_SIGNALS:  # they parsed once already; should they fail now, name only the other folders
        return []
    given = [(key, value) for key, value in params.items()
             if value and isinstance(value, (str, Path)) and any(word in key for word in FOLDER_OPTIONS)]
    given.sort(key=lambda item: "output" not in item[0])  # stable: --output first, then the options in their order
    return [Path(str(value).removeprefix("hf:")) for _, value in given]


def _free_bytes(folder: Path) -> int:
    """Free bytes on the disk of FOLDER, or of its nearest existing parent (a glob, a folder not made yet)."""
    folder = folder.absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return sys.maxsize


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

