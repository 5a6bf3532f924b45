"""Commands that run the Prefect deployments: serve, deploy."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from curate.cli.app import app


@app.command()
def deploy(
    name: Annotated[Optional[list[str]], typer.Option("--name", "-n", help="Deployment to register (repeatable; default: all).")] = None,
    prefect_file: Annotated[Optional[Path], typer.Option(help="prefect.yaml (default: found in this folder or above).")] = None,
) -> None:
    """Register the deployments of prefect.yaml with the Prefect server (wraps `prefect deploy`).

    Start a server and a worker first (see prefect.yaml's header). Examples:

        curate deploy

        curate deploy --name nightly-tag
    """
    from curate.flows.deployments import find_project_file
    from curate.flows.deployments import deploy as run_deploy

    code = run_deploy(prefect_file or find_project_file(), name or None)
    raise typer.Exit(code)


@app.command()
def serve(
    name: Annotated[Optional[list[str]], typer.Option("--name", "-n", help="Deployment to serve (repeatable; default: all).")] = None,
    prefect_file: Annotated[Optional[Path], typer.Option(help="prefect.yaml (default: found in this folder or above).")] = None,
) -> None:
    """Run the deployments of prefect.yaml in this process with Prefect's `serve`; their schedules fire until Ctrl-C.

    Examples:

        curate serve

        curate serve --name nightly-tag    # then: prefect deployment run tag/nightly-tag
    """
    from curate.flows.deployments import find_project_file
    from curate.flows.deployments import serve as run_serve

    run_serve(prefect_file or find_project_file(), name or None)

