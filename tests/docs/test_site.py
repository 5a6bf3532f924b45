"""The docs: the site builds with `mkdocs build --strict` (every nav page present, every link and anchor resolved),
the CLI reference is what docs/gen_cli.py makes from the commands' `--help`, README stays a short front page whose
links stay inside the repository, and README's commands are the ones .ci/run runs."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 300


def test_the_site_builds_in_strict_mode(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], check=False,
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    cli = (site / "cli" / "index.html").read_text()
    assert "curate build" in cli and "--behaviors" in cli
    assert (site / "benchmarks" / "index.html").is_file() and (site / "concepts" / "index.html").is_file()


def test_the_cli_page_is_what_the_generator_writes():
    spec = importlib.util.spec_from_file_location("gen_cli", ROOT / "docs" / "gen_cli.py")
    gen_cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_cli)
    assert (ROOT / "docs" / "cli.md").read_text() == gen_cli.render(), (
        "docs/cli.md is out of date: run `python docs/gen_cli.py` and commit docs/cli.md")


def test_readme_is_a_short_front_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_links_stay_inside_the_repository():
    text = README.read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets
    for target in targets:
        if target.startswith(("https://", "http://")):
            continue  # a public page
        path = (ROOT / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT), f"README links outside the repository: {target}"
        assert path.exists(), f"README links to a missing file: {target}"


def test_readme_shows_the_commands_ci_runs():
    """.ci/run installs and tests exactly as README says: README's first command is .ci/run's set-up line, and its
    trainers and test commands are .ci/run's."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    mirrored = [ci[i + 1] for i, line in enumerate(ci) if line.startswith("# --- README")]
    assert len(mirrored) == 3, mirrored
    setup, trainers, tests = mirrored
    readme = README.read_text()
    first_block = re.search(r"```bash\n(.*?)\n```", readme, re.DOTALL).group(1)
    assert first_block == setup
    assert trainers in readme.splitlines() and tests in readme.splitlines()
