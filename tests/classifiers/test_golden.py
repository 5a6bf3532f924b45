"""Released classifier versions are frozen: each one's labels of the golden corpus (tests/golden/corpus.jsonl) must
equal the labels committed when it was released, so that an edit to the cue engine or a shared rule module cannot
silently move an old version (and with it the inputs of every model trained on its output).

Classifiers that cannot label in process on CPU are covered by their own tests instead (tests/golden/record.py's
NOT_GOLDEN names them and where): llm_v1, llm_spans_v1 and cascade_v1 ask a model server, distilled_v1 and
user_ngram_v1 need a user's model directory.
"""

import json
import math

import pytest

from curate.classifiers import registered_names
from tests.golden.record import NOT_GOLDEN, SCORE_TOLERANCE, golden_output, golden_path
from tests.golden.record import main as record_main

GOLDEN = sorted(name for name in registered_names() if name not in NOT_GOLDEN)


def test_every_registered_classifier_is_pinned_or_said_why_not():
    missing = [name for name in GOLDEN if not golden_path(name).exists()]
    assert not missing, f"no golden labels for {missing}: run .venv/bin/python -m tests.golden.record {' '.join(missing)}"
    assert set(NOT_GOLDEN) <= set(registered_names()), "NOT_GOLDEN names a classifier that is no longer registered"


def _differences(expected: dict, actual: dict) -> list[str]:
    """Every way the actual labels differ from the golden ones, one line each, scores within SCORE_TOLERANCE."""
    differences = []
    if expected["prompt_version"] != actual["prompt_version"]:
        differences.append(f"prompt_version {expected['prompt_version']!r} -> {actual['prompt_version']!r}")
    for want, got in zip(expected["labels"], actual["labels"], strict=True):
        doc = want["id"]
        for key in ("counts", "error"):
            if want[key] != got[key]:
                differences.append(f"{doc}: {key} {want[key]} -> {got[key]}")
        spans_want = [tuple(e[:3]) for e in want["evidence"]]
        spans_got = [tuple(e[:3]) for e in got["evidence"]]
        if spans_want != spans_got:
            differences.append(f"{doc}: evidence {sorted(set(spans_want) ^ set(spans_got))} differ")
        else:
            for span, a, b in zip(spans_want, (e[3] for e in want["evidence"]), (e[3] for e in got["evidence"])):
                if (a is None) != (b is None) or (a is not None and not math.isclose(a, b, abs_tol=SCORE_TOLERANCE)):
                    differences.append(f"{doc}: evidence {span} score {a} -> {b}")
        if (want["scores"] is None) != (got["scores"] is None):
            differences.append(f"{doc}: scores {want['scores']} -> {got['scores']}")
        elif want["scores"] is not None:
            for behavior, score in want["scores"].items():
                other = got["scores"].get(behavior)
                if (score is None) != (other is None) or (
                        score is not None and not math.isclose(score, other, abs_tol=SCORE_TOLERANCE)):
                    differences.append(f"{doc}: score of {behavior} {score} -> {other}")
    return differences


@pytest.mark.parametrize("name", GOLDEN)
def test_released_version_labels_the_golden_corpus_as_recorded(name):
    path = golden_path(name)
    if not path.exists():
        pytest.fail(f"no golden labels for {name}: run .venv/bin/python -m tests.golden.record {name}")
    expected = json.loads(path.read_text(encoding="utf-8"))
    # Through JSON so that tuples, ints and floats compare as the stored file holds them.
    actual = json.loads(json.dumps(golden_output(name)))
    differences = _differences(expected, actual)
    assert not differences, (
        f"{name}, a released version, now labels the golden corpus differently ({len(differences)} differences; "
        f"first: {differences[:5]}). Release the change as a new version instead of editing this one."
    )


def test_a_golden_corpus_that_exercises_every_behavior():
    """Golden labels that never fire pin nothing: the corpus must give every behavior evidence under the default."""
    expected = json.loads(golden_path("cues_ngram_v1").read_text(encoding="utf-8"))
    behaviors = {e[0] for label in expected["labels"] for e in label["evidence"]}
    assert behaviors == {"verification", "backtracking", "subgoal_setting", "backward_chaining"}


def test_a_changed_label_is_caught():
    """The comparison itself: one count, one span end and one score moved past the tolerance are each reported."""
    expected = json.loads(golden_path("cues_ngram_v1").read_text(encoding="utf-8"))
    changed = json.loads(json.dumps(expected))
    label = next(item for item in changed["labels"] if item["evidence"])
    behavior = label["evidence"][0][0]
    label["counts"][behavior] += 1
    label["evidence"][0][2] += 1
    label["scores"][behavior] += 2 * SCORE_TOLERANCE
    differences = _differences(expected, changed)
    assert len(differences) == 3, differences
    assert _differences(expected, json.loads(json.dumps(expected))) == []


def test_recording_refuses_to_overwrite_a_released_version(capsys):
    path = golden_path("cues_v1")
    before = path.read_bytes()
    assert record_main(["cues_v1"]) == 2
    assert "must not change" in capsys.readouterr().err
    assert path.read_bytes() == before
