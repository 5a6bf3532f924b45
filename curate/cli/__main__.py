"""`python -m curate.cli` runs the command line (tests and benches start it in a fresh process this way)."""

from curate.cli import app

app()
