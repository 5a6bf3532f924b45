"""cues_v8's Countdown subgoals and its guard on narrated computations, in short traces of this file's own (none
copied from round 8), and the version rule: v8 is v7 with three plan cues guarded, plus its additions."""

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cues_v7 import CUES_V7
from curate.classifiers.cues_v8 import ADDED, CUES_V8, NARRATING
from tests.support.cue_checks import S, assert_countdown_targets, present


@pytest.fixture(scope="module")
def v8():
    return get_classifier("cues_v8")


@pytest.mark.parametrize(
    "text",
    [
        "<think> 84 = 4 * 21. 21 = 15 + 6. so 4 * (15 + 6) = 84 </think>",
        "Try 90 - 4. 4 from 7 and 3?",
        "72 = 8 * 9, need another 9.",
        "The second 5 needs to come from 12 and 7.",
    ],
)
def test_countdown_subgoals(v8, text):
    assert S in present(v8.classify([text])[0])


@pytest.mark.parametrize(
    "text",
    [
        # One forward computation narrated, and two numbers factored side by side.
        "I'll first multiply 6 by 4 to get 24, then add 3.",
        "The first thing we need to do is add 12 and 9, which gives 21.",
        "14 = 2 * 7. 100 = 2 * 50.",
    ],
)
def test_narrations_and_side_by_side_factorizations_set_no_subgoal(v8, text):
    assert S not in present(v8.classify([text])[0])


def test_v7_read_each_narration_as_a_plan():
    """The guard changes what v7 read: the narrations above were subgoal setting under v7."""
    v7 = get_classifier("cues_v7")
    assert all(S in present(label) for label in v7.classify([
        "I'll first multiply 6 by 4 to get 24, then add 3.",
        "The first thing we need to do is add 12 and 9, which gives 21.",
    ]))


def test_v8_is_v7_with_guards_plus_its_additions():
    assert len(CUES_V8) == len(CUES_V7) + len(ADDED) and CUES_V8[len(CUES_V7) :] == ADDED
    changed = [(old, new) for old, new in zip(CUES_V7, CUES_V8) if old != new]
    assert sorted(old.pattern for old, _ in changed) == sorted(NARRATING)
    assert all(old.pattern == new.pattern and new.unless_then for old, new in changed)


def test_countdown_targets_still_hold(v8):
    assert_countdown_targets(v8)

