"""The verl reward file loads the three ways verl loads one, and a reward that cannot check says so instead of scoring.

verl 0.9.1 executes a file by path under a generated name kept out of sys.modules; older verl registered it as
`custom_module`; `pkg://` imports it. A Python where math-verify is missing is made for real in a child process:
`sys.modules["math_verify"] = None` (set by a sitecustomize on its path) is how Python marks a module unimportable.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from curate.rewards import REWARD_PATH

ROOT = Path(__file__).resolve().parents[2]
RIGHT, WRONG, GOLD = "so the answer is \\boxed{\\frac{1}{2}}", "so the answer is \\boxed{0.6}", "0.5"


def test_the_reward_file_loads_under_the_older_loaders_module_name():
    spec = importlib.util.spec_from_file_location("custom_module", REWARD_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    try:
        spec.loader.exec_module(module)
        assert module.compute_score("curate/math", RIGHT, GOLD) == 1.0
        assert module.compute_score("curate/math", WRONG, GOLD) == 0.0
    finally:
        del sys.modules["custom_module"]


@pytest.mark.parametrize("path", [str(REWARD_PATH), str(REWARD_PATH.parent / "registry.py"),
                                  "pkg://curate.rewards.verl_reward"])
def test_verl_loads_the_reward_by_path_and_by_package(path):
    pytest.importorskip("verl", reason="verl not installed (see README: the trainers test extra)")
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = OmegaConf.create({"reward": {"custom_reward_function": {"path": path, "name": "compute_score"}}})
    compute_score = get_custom_reward_fn(config)
    assert compute_score(data_source="curate/math", solution_str=RIGHT, ground_truth=GOLD, extra_info={}) == 1.0
    assert compute_score(data_source="curate/math", solution_str=WRONG, ground_truth=GOLD, extra_info={}) == 0.0


def _without_math_verify(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['math_verify'] = None\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120)


def test_a_reward_without_math_verify_raises_the_fix_instead_of_scoring_zero(tmp_path):
    done = _without_math_verify(tmp_path, (
        "from curate.rewards import compute_score\n"
        f"print(compute_score('curate/math', {RIGHT!r}, {GOLD!r}))\n"))
    assert done.returncode != 0 and "0.0" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("curate.rewards.equivalence.CheckerUnavailableError: math-verify is not installed in")
    assert "pip install 'math-verify>=0.7'" in last


def test_the_verl_reward_file_refuses_to_load_without_math_verify(tmp_path):
    done = _without_math_verify(tmp_path, (
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('custom_module_1', {str(REWARD_PATH)!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"))
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode != 0 and last.startswith("ImportError: the math-answer check (math_verify) is not installed")
