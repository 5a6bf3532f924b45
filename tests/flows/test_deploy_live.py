"""`curate deploy` against a running Prefect server, and a worker that runs the deployment.

prefect_test_harness starts a real Prefect API server in a subprocess; the CLI, `prefect deploy` and
the process worker reach it over HTTP the way they reach a production server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL
from prefect.testing.utilities import prefect_test_harness

from curate.classifiers import resolve_name
from curate.cli import SAMPLE_CORPUS
from curate.data_cards.cards import check_card

ROOT = Path(__file__).resolve().parents[2]
POOL = "curate-local"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    storage = tmp_path_factory.mktemp("prefect-results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(storage))
        # A busy 2-core machine can take more than the default 30 s to start the temporary server.
        with prefect_test_harness(server_startup_timeout=180):
            yield PREFECT_API_URL.value()


@pytest.fixture
def project(tmp_path) -> Path:
    """The project as a user has it: prefect.yaml beside the curate sources, outputs written inside it."""
    shutil.copy(ROOT / "prefect.yaml", tmp_path / "prefect.yaml")
    (tmp_path / "curate").symlink_to(ROOT / "curate")
    return tmp_path


def cli(args: list[str], api_url: str, cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PREFECT_API_URL": api_url, "PREFECT_HOME": str(cwd / ".prefect")}
    return subprocess.run(args, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_curate_deploy_registers_with_a_live_server_and_a_worker_runs_the_deployment(server, project):
    bin_dir = Path(sys.executable).parent
    no_pool = cli([str(bin_dir / "curate"), "deploy", "--name", "weekly-priming"], server, project)
    assert no_pool.returncode == 2
    assert f"prefect work-pool create {POOL} --type process" in " ".join((no_pool.stdout + no_pool.stderr).split())

    created = cli([str(bin_dir / "prefect"), "work-pool", "create", POOL, "--type", "process"], server, project)
    assert created.returncode == 0, created.stdout + created.stderr

    deployed = cli([str(bin_dir / "curate"), "deploy", "--name", "weekly-priming", "--name", "nightly-tag"],
                   server, project)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr

    with get_client(sync_client=True) as client:
        priming = client.read_deployment_by_name("priming/weekly-priming")
        tag = client.read_deployment_by_name("tag/nightly-tag")
    assert priming.work_pool_name == tag.work_pool_name == POOL
    assert [s.schedule.cron for s in priming.schedules] == ["0 4 * * 0"]
    assert [s.schedule.cron for s in tag.schedules] == ["0 2 * * *"]
    assert priming.parameters["params"]["variant"] == "all"

    shutil.copytree(SAMPLE_CORPUS, project / "corpus")
    runs = [
        run_deployment("priming/weekly-priming", timeout=0, parameters={
            "params": {"variant": "empty_cot", "output": "datasets/priming", "n": 4, "test_n": 2}}),
        run_deployment("tag/nightly-tag", timeout=0),  # as scheduled: corpus/*.jsonl into tags/
    ]
    worked = cli([str(bin_dir / "prefect"), "worker", "start", "--pool", POOL, "--run-once"], server, project)
    assert worked.returncode == 0, worked.stdout + worked.stderr

    with get_client(sync_client=True) as client:
        states = [client.read_flow_run(run.id).state for run in runs]
    assert all(state.is_completed() for state in states), (states, worked.stdout[-3000:], worked.stderr[-3000:])
    # The pull step ran the flows in the project folder, so relative paths resolve there.
    output = project / "datasets" / "priming"
    assert pq.read_table(output / "data" / "train-00000.parquet").num_rows == 4
    assert check_card(output / "README.md").data.configs
    tags = project / "tags" / resolve_name("cues")[0]
    assert sum(pq.ParquetFile(p).metadata.num_rows for p in tags.glob("*.parquet")) == 300


def test_curate_deploy_fails_clearly_without_a_server(project):
    result = cli([str(Path(sys.executable).parent / "curate"), "deploy", "--name", "weekly-priming"],
                 "http://127.0.0.1:9/api", project, timeout=120)
    assert result.returncode == 2
    assert "no Prefect server answers at http://127.0.0.1:9/api" in " ".join((result.stdout + result.stderr).split())


def test_curate_deploy_names_an_unknown_deployment(project):
    result = cli([str(Path(sys.executable).parent / "curate"), "deploy", "--name", "no-such"],
                 "http://127.0.0.1:9/api", project)
    assert result.returncode != 0 and "no deployment named no-such" in result.stdout + result.stderr
