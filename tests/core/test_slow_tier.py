"""tests/slow_tests.txt names only tests that exist, so the fast tier (`pytest -m "not slow"`) does not silently
grow back when a slow test is renamed or moved."""

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import slow_entries

ROOT = Path(__file__).resolve().parents[2]


def defined_tests(module: Path) -> set[str]:
    """The node ids (without parametrization) of the test functions in MODULE: top level and in Test classes."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            found |= {f"{node.name}::{f.name}" for f in node.body
                      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("test")}
    return found


def test_every_slow_entry_names_an_existing_test():
    entries = slow_entries()
    assert entries, "tests/slow_tests.txt lists no test"
    missing = []
    for entry in entries:
        path, _, test = entry.partition("::")
        module = ROOT / path
        if not module.is_file() or (test and test.split("[")[0] not in defined_tests(module)):
            missing.append(entry)
    assert not missing, f"tests/slow_tests.txt names tests that do not exist (remove or rename them): {missing}"


def test_the_fast_tier_leaves_out_a_listed_module_and_a_listed_test_and_keeps_the_rest():
    entries = slow_entries()
    module = next(e for e in entries if "::" not in e)
    test = next(e for e in entries if "::" in e)
    test_module = test.split("::")[0]
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", "-p", "no:cacheprovider",
         module, test_module],
        cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout.splitlines()
    ids = [line for line in collected if "::" in line]
    assert not any(line.startswith(module) for line in ids)
    assert not any(line.split("[")[0] == test for line in ids)
    assert any(line.startswith(test_module) for line in ids), "the listed test's neighbours stay in the fast tier"
