"""Every command's --help at 80 columns: no line wider than the terminal, and every example of its docstring shown
whole, so that its lines, joined at their ` \\` continuations, are the command as written."""

from __future__ import annotations

import inspect
import re
import shlex

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from curate.cli.app import app

GROUP = get_command(app)
COMMANDS = sorted(GROUP.commands)


def written_examples(docstring: str) -> list[str]:
    """The docstring's example commands, read apart from the fitter: its indented lines that start with `curate`,
    joined over the author's own continuations, without a trailing comment, spaces collapsed."""
    commands, pending = [], None
    for line in inspect.cleandoc(docstring).splitlines():
        text = line.strip()
        if pending is not None:
            pending += " " + text.rstrip("\\").strip()
            if not text.endswith("\\"):
                commands.append(pending)
                pending = None
            continue
        if line.startswith("    ") and text.startswith("curate "):
            if text.endswith("\\"):
                pending = text.rstrip("\\").strip()
            else:
                commands.append(text)
    return [" ".join(re.sub(r"\s{2,}#\s.*$", "", c).split()) for c in commands]


def shown_examples(output: str) -> list[str]:
    joined = re.sub(r" \\\n\s+", " ", output)
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip().startswith("curate ")]


def test_the_fitter_never_breaks_inside_a_quoted_word():
    from curate.cli.help_text import fit_command

    lines = fit_command("curate build --input 'a folder with spaces/*.jsonl' --output out/ --behaviors none", 30)
    assert all(len(line) <= 30 or len(shlex.split(line.removesuffix(" \\"))) == 1 for line in lines), lines
    assert shlex.split(" ".join(line.removesuffix(" \\") for line in lines)) == shlex.split(
        "curate build --input 'a folder with spaces/*.jsonl' --output out/ --behaviors none")
    assert " ".join(line.rstrip(" \\").strip() for line in lines) == (
        "curate build --input 'a folder with spaces/*.jsonl' --output out/ --behaviors none")
    assert any("'a folder with spaces/*.jsonl'" in line for line in lines)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_fits_80_columns_and_shows_every_example_whole(name):
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    # Only a single word longer than a line (a long path) may reach past the edge, on a line of its own.
    wide = [line for line in result.output.splitlines()
            if len(line) > 80 and " " in line.removesuffix(" \\").strip()]
    assert not wide, wide
    written = written_examples(GROUP.commands[name].callback.__doc__ or "")
    shown = shown_examples(result.output)
    for example in written:
        assert example in shown, (example, shown)
