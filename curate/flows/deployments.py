"""Reading prefect.yaml: the deployments `curate serve` runs locally and `curate deploy` registers.

`prefect deploy` reads the same file, so a deployment is described once for both.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from curate.errors import CurateError, InputError, OptionError

PROJECT_FILE = "prefect.yaml"


@dataclass
class DeploymentSpec:
    name: str
    entrypoint: str
    parameters: dict = field(default_factory=dict)
    crons: list[str] = field(default_factory=list)
    timezone: str | None = None
    description: str | None = None
    tags: list[str] = field(default_factory=list)
    work_pool: str | None = None


def find_project_file(start: str | Path = ".") -> Path:
    for folder in [Path(start).resolve(), *Path(start).resolve().parents]:
        if (folder / PROJECT_FILE).is_file():
            return folder / PROJECT_FILE
    raise FileNotFoundError(f"no {PROJECT_FILE} in {Path(start).resolve()} or above; run from the curate project")


def load_deployments(path: str | Path) -> list[DeploymentSpec]:
    """The deployments of a prefect.yaml (YAML anchors from `definitions` resolved)."""
    document = yaml.safe_load(Path(path).read_text())
    specs = []
    for entry in document.get("deployments") or []:
        if "name" not in entry or "entrypoint" not in entry:
            raise InputError(f"{path}: every deployment needs a name and an entrypoint, got {entry!r}")
        schedules = entry.get("schedules") or []
        specs.append(DeploymentSpec(
            name=entry["name"], entrypoint=entry["entrypoint"], parameters=entry.get("parameters") or {},
            crons=[s["cron"] for s in schedules if s.get("cron") and s.get("active", True)],
            timezone=next((s.get("timezone") for s in schedules if s.get("timezone")), None),
            description=entry.get("description"), tags=entry.get("tags") or [],
            work_pool=(entry.get("work_pool") or {}).get("name"),
        ))
    return specs


def load_flow(spec: DeploymentSpec, root: Path):
    from prefect.flows import load_flow_from_entrypoint

    module_path, _, _ = spec.entrypoint.partition(":")
    if not (root / module_path).is_file():
        raise FileNotFoundError(f"deployment {spec.name!r}: entrypoint file {root / module_path} does not exist")
    return load_flow_from_entrypoint(str(root / spec.entrypoint))


def serve(path: str | Path, names: list[str] | None = None) -> None:
    """Runs the deployments in this process with Prefect's `serve`: schedules fire while it runs."""
    from prefect import serve as prefect_serve

    path = Path(path)
    specs = [s for s in load_deployments(path) if not names or s.name in names]
    missing = set(names or []) - {s.name for s in specs}
    if missing:
        raise OptionError(f"no deployment named {', '.join(sorted(missing))} in {path}")
    deployments = [
        load_flow(s, path.parent).to_deployment(
            name=s.name, cron=s.crons or None, parameters=s.parameters, description=s.description, tags=s.tags,
        )
        for s in specs
    ]
    os.chdir(path.parent)  # parameters hold paths relative to the project, as they do for a worker
    prefect_serve(*deployments)


class ServerNotReady(CurateError, RuntimeError):
    pass


def check_server(work_pools: set[str]) -> str:
    """The API URL, once the server answers and has every work pool the deployments name."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise ServerNotReady("PREFECT_API_URL is not set, so there is no server to register with. Start one with "
                             "`prefect server start` and run `prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`")
    with get_client(sync_client=True) as client:
        if client.api_healthcheck() is not None:
            raise ServerNotReady(f"no Prefect server answers at {url}; start it with `prefect server start` "
                                 "or point PREFECT_API_URL at a running one")
        for pool in sorted(work_pools):
            try:
                client.read_work_pool(pool)
            except ObjectNotFound:
                raise ServerNotReady(f"the server at {url} has no work pool {pool!r}; create it with "
                                     f"`prefect work-pool create {pool} --type process`") from None
    return url


def deploy(path: str | Path, names: list[str] | None = None) -> int:
    """`prefect deploy` for the named deployments (all when none), run from the project directory."""
    path = Path(path)
    specs = load_deployments(path)
    missing = set(names or []) - {s.name for s in specs}
    if missing:
        raise OptionError(f"no deployment named {', '.join(sorted(missing))} in {path}")
    check_server({s.work_pool for s in specs if s.work_pool and (not names or s.name in names)})
    command = [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--prefect-file", str(path)]
    command += [a for n in names for a in ("--name", n)] if names else ["--all"]
    # The pull step resolves `{{ $PWD }}` from the environment, which a changed cwd alone does not update.
    env = {**os.environ, "PWD": str(path.parent.resolve())}
    return subprocess.run(command, check=False, cwd=path.parent, env=env).returncode
