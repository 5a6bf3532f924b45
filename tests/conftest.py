import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from tests.support.shared import SHARED_DATA  # after the offline switches


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (set CURATE_SHARED_DATA)")
    return SHARED_DATA


SLOW_TESTS = Path(__file__).with_name("slow_tests.txt")


def slow_entries() -> list[str]:
    """The entries of tests/slow_tests.txt: test modules, tests and parametrized cases, as pytest's node ids."""
    lines = (line.strip() for line in SLOW_TESTS.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def pytest_collection_modifyitems(config, items):
    """Marks `slow` every test that tests/slow_tests.txt names by its module, its function or its own node id."""
    entries = set(slow_entries())
    for item in items:
        node = item.nodeid
        if {node, node.split("[")[0], node.split("::")[0]} & entries:
            item.add_marker(pytest.mark.slow)
