"""The `curate` command line: thin; options come from the job configs, one error runner, progress and summaries.

`app` is assembled here: each module below registers its commands on it when imported.
"""

from curate.cli import build, handoff, orchestrate, review, tag  # noqa: F401  (registers the commands)
from curate.cli.app import app
from curate.cli.options import SAMPLE_CORPUS

__all__ = ["app", "SAMPLE_CORPUS"]
