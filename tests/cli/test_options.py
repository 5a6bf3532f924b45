"""Every command keeps the options it had before the CLI was split into modules (issue 16).

`options_snapshot.json` was written from the single-module CLI (commit e46495d): for each command, each
parameter's flags and default. A change here is a change users see; update the snapshot on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer.main

from curate.cli import app

SNAPSHOT = Path(__file__).with_name("options_snapshot.json")


def current_options() -> dict:
    group = typer.main.get_command(app)
    return {
        name: sorted([sorted(p.opts + p.secondary_opts), str(p.default)] for p in command.params)
        for name, command in sorted(group.commands.items())
    }


def test_every_command_keeps_its_options():
    expected = json.loads(SNAPSHOT.read_text())
    assert current_options() == expected
