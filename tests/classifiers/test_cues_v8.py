"""cues_v8's Countdown subgoals and its guard on narrated computations, in short traces of this file's own (none
copied from round 8), and the version rule: v8 is v7 with three plan cues guarded, plus its additions."""

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cue_rules import changed_fields, diff, read_version
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


# v7's plan cues that narrate a forward computation when an operation on a number comes next, which v8 guards.
NARRATING = {
    "i|we will|'ll|should|can|must|need first",
    "the|our|my first|next|last|final|second|third step|task|goal|subgoal|job|thing",
    "then|next ,? i|we 'll|will|need|must|should",
}


def test_v8_is_v7_with_guards_plus_its_additions():
    v7, v8 = read_version("cues_v7"), read_version("cues_v8")
    found = diff(v7, v8)
    assert (len(found.added), found.dropped) == (4, ())
    assert v8.cues[len(v7.cues) :] == found.added
    assert {(new.behavior, new.pattern) for _, new in found.changed} == {(S, p) for p in NARRATING}
    assert all(changed_fields(old, new) == {"unless_then"} and new.unless_then for old, new in found.changed)


def test_countdown_targets_still_hold(v8):
    assert_countdown_targets(v8)

