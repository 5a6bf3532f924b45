"""curate's math reward against a public answer checker's own test-suite: math-verify's (gold, prediction, expected)
regression cases, read from its source distribution (MIT, HuggingFace), never copied into this repository.

    .venv/bin/pip download math-verify==0.9.0 --no-deps --no-binary :all: -d /tmp/mv
    tar xzf /tmp/mv/*.tar.gz -C /tmp/mv
    .venv/bin/python bench/checker_suite.py /tmp/mv/math_verify-0.9.0/tests [--show N]

Every parametrized case whose values are literals (read with `ast.literal_eval`, nothing executed) is scored three ways:
- math-verify itself: `verify(parse(gold), parse(prediction))`, the library's defaults, as its README calls it;
- curate as the audit calls it: the gold's final answer against the prediction read as a bare answer (`BARE`);
- curate as training calls it: the prediction is the model's whole response (`DEFAULT` extraction), reported also on
  the responses that mark their answer (a box, an answer tag or line, `####`: a pattern written here, apart from
  curate's extractor).
Case lists that set a comparison option (precision, strict, set relations) are left out.
A case's gold is reduced to its final answer the way a dataset's gold column would hold it (its last box, else its
last math span). Agreement is with the suite's expected verdict; a false accept is a 1 where the suite expects 0.
"""

from __future__ import annotations

import argparse
import ast
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from curate.rewards import BARE, DEFAULT, extract_answer, get_reward

CASE_FIELDS = {"gold", "pred", "expected", "result", "match_types"}
MARKED = re.compile(r"\\boxed|\\fbox|<answer>|answer\s*(?:is|:)|^####|^A:", re.IGNORECASE | re.MULTILINE)


def suite_cases(tests: Path) -> list[tuple[str, str, str, int]]:
    """(where, gold, prediction, expected) for every literal 3- or 4-tuple case of a parametrize decorator."""
    cases = []
    for path in sorted(tests.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "parametrize"):
                continue
            names = node.args[0].value if isinstance(node.args[0], ast.Constant) else ""
            fields = [n.strip() for n in str(names).split(",")]
            # A case list that also sets a comparison option (precision, strict, set relations) expects what that
            # option gives, not what the checker's defaults should: left out.
            if len(node.args) < 2 or not {"gold", "pred"} <= set(fields) <= CASE_FIELDS:
                continue
            for element in getattr(node.args[1], "elts", []):
                try:
                    values = ast.literal_eval(element)
                except ValueError:
                    continue  # an f-string or a call: not data
                row = dict(zip(fields, values))
                expected = row.get("expected", row.get("result"))
                if isinstance(row.get("gold"), str) and isinstance(row.get("pred"), str) and expected in (0, 1):
                    cases.append((f"{path.name}:{element.lineno}", row["gold"], row["pred"], int(expected)))
    return cases


def gold_answer(gold: str) -> str:
    return extract_answer(gold, BARE) or gold


def math_verify_verdict(gold: str, pred: str) -> int:
    from math_verify import parse, verify

    return int(bool(verify(parse(gold), parse(pred))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tests", type=Path, help="math-verify's tests/ folder (from its sdist)")
    parser.add_argument("--show", type=int, default=40, help="disagreements to list per scorer")
    args = parser.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    cases = suite_cases(args.tests)
    reward = get_reward("math")

    def curate(case, extraction):
        value = reward.score(case[2], gold_answer(case[1]), None, extraction)
        return int(value == 1.0)

    own = [math_verify_verdict(gold, pred) for _, gold, pred, _ in cases]
    with ThreadPoolExecutor(4) as pool:
        bare = list(pool.map(lambda c: curate(c, BARE), cases))
        trained = list(pool.map(lambda c: curate(c, DEFAULT), cases))
    marked = [i for i, c in enumerate(cases) if MARKED.search(c[2])]
    print(f"{len(cases)} cases from {args.tests} ({len(marked)} predictions mark their answer)")
    for name, verdicts, subset in (("math-verify (own defaults)", own, range(len(cases))),
                                   ("curate/math, bare answers", bare, range(len(cases))),
                                   ("curate/math, as training", trained, range(len(cases))),
                                   ("curate/math, as training, marked", trained, marked)):
        agree = sum(verdicts[i] == cases[i][3] for i in subset)
        false_accepts = [i for i in subset if verdicts[i] == 1 and cases[i][3] == 0]
        print(f"{name:<36} agree {agree}/{len(subset)} = {agree / max(1, len(subset)):.3f}  "
              f"false accepts {len(false_accepts)}")
    for name, verdicts in (("curate bare", bare), ("curate training", trained), ("math-verify", own)):
        wrong = [i for i in range(len(cases)) if verdicts[i] != cases[i][3]]
        print(f"--- {name}: {len(wrong)} disagreements")
        for i in wrong[: args.show]:
            where, gold, pred, expected = cases[i]
            got = extract_answer(pred, BARE if name == "curate bare" else DEFAULT)
            print(f"  {where} expected {expected} gold={gold_answer(gold)[:50]!r} read={str(got)[:50]!r} "
                  f"pred=...{pred[-90:]!r}")


if __name__ == "__main__":
    main()
