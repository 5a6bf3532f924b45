"""cues_v12's real-text revisions in short texts of this file's own (none copied from a labeled set): the revisions
and goal-to-requirement sentences that still count, the look-alikes its guards drop, and the version rule: v12 is v11
with some cues' context fields changed, plus its additions at the end."""

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cue_rules import changed_fields, diff, read_version
from tests.support.cue_checks import B, C, S, V, assert_countdown_targets, present


@pytest.fixture(scope="module")
def v12():
    return get_classifier("cues_v12")


@pytest.fixture(scope="module")
def v11():
    return get_classifier("cues_v11")


@pytest.mark.parametrize(
    "text",
    [
        # A "Wait, actually" that says what was wrong.
        "Wait, actually, that's not right: 7 * 8 is 56, not 54.",
        "Wait, actually, I made a mistake in the sign of the second term.",
        # A change of method after a check that failed.
        "Let me check: 5 * 3 = 15, not 16. Let me try another approach.",
        "Let me verify the sum again. The total is wrong. Maybe there's a better way to count them.",
        # "Let me think again" after a failure, not after an accepted answer.
        "That gives a negative area, which can't be right. Let me think again.",
    ],
)
def test_revisions_still_read(v12, text):
    assert B in present(v12.classify([text])[0])


@pytest.mark.parametrize(
    "text",
    [
        # "Wait, actually" adding a fact, nothing judged wrong.
        "Wait, actually, the triangle is also isosceles, so both base angles are 40 degrees.",
        # An answer accepted, then re-examined.
        "So the answer is 7. But let me think again.",
        # Another method taken to confirm: announced in the sentence before, or in the same one.
        "The area is 96. Let me double-check that. Maybe there's a simpler way to approach this.",
        "Let me make sure this is right. Starting over: 12 * 8 = 96.",
        "Maybe I can approach this differently to confirm.",
    ],
)
def test_backtracking_look_alikes_are_dropped(v11, v12, text):
    assert B in present(v11.classify([text])[0])
    assert B not in present(v12.classify([text])[0])


def test_a_check_before_a_change_of_method_in_its_sentence_stays_verification(v12):
    assert V in present(v12.classify(["But to make sure, let's consider another way to count the pairs."])[0])


@pytest.mark.parametrize(
    "text",
    [
        "My goal is to find the largest n below 500, so I need to find the remainder of 500 by 7 first.",
        "She wants to have enough cupcakes for the whole class, so she needs 40 / 8 = 5 boxes.",
        "We want the product to be even, so we have to pick at least one even factor.",
    ],
)
def test_a_goal_then_what_it_requires(v11, v12, text):
    assert C not in present(v11.classify([text])[0])
    assert C in present(v12.classify([text])[0])


@pytest.mark.parametrize(
    "text",
    [
        # Unfolding a definition.
        "First, I need to understand what it means for a number to be a perfect cube.",
        # A quantity named by what it is the time of, then computed forward.
        "The time taken for the train to cross the bridge would be 300 / 20 = 15 seconds.",
    ],
)
def test_backward_chaining_look_alikes_are_dropped(v11, v12, text):
    assert C in present(v11.classify([text])[0])
    assert C not in present(v12.classify([text])[0])


@pytest.mark.parametrize(
    "text",
    [
        # Advice after a goal, not a requirement derived from it.
        "He wants to minimize the cost, so he should buy the larger pack.",
        # A want with no requirement after it.
        "I want to thank everyone for the help so far.",
        # A count the problem gives, multiplied out.
        "She wants to make 3 cakes, so she needs 3 * 4 = 12 eggs.",
        "He wants to plant 12 rows, so he will need 12 * 8 = 96 seeds.",
        # A step of the method, not something the goal needs.
        "We want to figure out y, so we need to isolate it by dividing both sides by 8.",
        # A word problem's story.
        "Tom is trying to finish before dinner, so he needs to decide whether to wash the car first.",
    ],
)
def test_goal_look_alikes_are_not_read(v12, text):
    assert C not in present(v12.classify([text])[0])


def test_a_check_in_a_word_problem_does_not_hide_the_plan(v12):
    text = (
        "It takes her 10 seconds to check a post. How much does she earn per hour?\n\n"
        "First find the number of seconds in an hour: 60 * 60 = 3600.\nThen divide 3600 by 10 to get 360 posts."
    )
    assert S in present(v12.classify([text])[0])


def test_steps_retold_to_check_are_not_a_plan(v11, v12):
    text = "The sum is 42. Let me double-check my steps.\n\nFirst, I added 20 and 22.\nThen I compared it with 42."
    assert S in present(v11.classify([text])[0])
    assert S not in present(v12.classify([text])[0])


def test_a_requirement_for_a_goal_still_reads(v12):
    assert C in present(v12.classify(["For the fraction to be an integer, the denominator must divide 12."])[0])


# v11's cues of a change of method, which a check announced before turns into another way to confirm, by how their
# patterns start.
CHANGES_OF_METHOD_START = (
    "start|starting|begin|begins over",
    "let me|us|'s try|use|take|consider a|another",
    "try|trying|tried a|another",
    "maybe|perhaps there 's|is a better",
    "think|thinking differently",
    "try|trying|tried|attempt|start|starting|begin again",
    "need|needs|try a|another different",
    "another try|attempt",
    "try|trying|tried|explore|exploring|attempt|attempting|need another",
    "try|trying|tried|explore|exploring|attempt|attempting|need a|some",
)
# The cues v12 revises, by behavior and exact pattern, with the context fields each revision may change.
REVISED = {
    (B, "wait"): {"unless_then"},
    (B, "let me|us|'s try|think|start once? again"): {"unless_before", "earlier"},
    (B, "approach|tackle it|this|that differently"): {"unless_then", "earlier"},
    (S, "first|firstly ,|of|let|i|we|off|step|thing"): {"unless_then", "earlier"},
    (S, "first"): {"earlier"},  # both of v4's "first" cues
    (C, "need|needs|must|require|requires"): {"unless_then"},
    (C, "should|has|have|would"): {"unless_before"},
}


def _revision(behavior: str, pattern: str) -> tuple[str, str]:
    """The entry of REVISED, or of the changes of method (by how the pattern starts), that names this cue."""
    if (behavior, pattern) in REVISED:
        return behavior, pattern
    (start,) = [s for s in CHANGES_OF_METHOD_START if behavior == B and pattern.startswith(s)]
    return B, start


def test_v12_is_v11_with_revised_context_plus_its_additions():
    v11, v12 = read_version("cues_v11"), read_version("cues_v12")
    found = diff(v11, v12)
    assert (len(found.added), found.dropped) == (2, ())
    assert v12.cues[len(v11.cues) :] == found.added
    allowed = {**REVISED, **{(B, start): {"earlier"} for start in CHANGES_OF_METHOD_START}}
    named = set()
    for old, new in found.changed:
        entry = _revision(new.behavior, new.pattern)
        named.add(entry)
        # Only the fields the revision names differ; pattern and behavior stay (a changed cue keeps both).
        assert changed_fields(old, new) <= allowed[entry], (new.pattern, changed_fields(old, new))
    assert named == set(allowed)
    assert len(found.changed) == len(allowed) + 1  # "first" names two cues


def test_countdown_targets_still_hold(v12):
    assert_countdown_targets(v12)
