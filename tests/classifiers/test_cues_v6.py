"""cues_v6's guards and families, in short sentences in each one's own words, plus the version rules: v6 is v5 with
five backtracking cues guarded and the listed cues added, and the Countdown targets still hold."""

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cue_rules import changed_fields, diff, read_version
from tests.support.cue_checks import B, C, S, assert_countdown_targets, present


@pytest.fixture(scope="module")
def v6():
    return get_classifier("cues_v6")


GUARDED = [
    # Nothing abandoned: an easier view, a nicer form, the narration resuming, someone else's find, a failed search.
    "Wait, actually, it's better to think in terms of periods.",
    "This seems a bit messy. Maybe there's a better way to express this.",
    "Now, going back to the earlier equation, we substitute the known values.",
    "Thanks for pointing out my mistake.",
    "Where is my mistake?",
    "I tried looking up some videos online for a general step by step solution, but no luck.",
]


@pytest.mark.parametrize("text", GUARDED)
def test_guarded_backtracking_look_alikes(v6, text):
    assert B not in present(v6.classify([text])[0])


def test_v5_read_each_guarded_phrase_as_backtracking():
    """The guards change what v5 read, and only that: each phrase above is backtracking under v5."""
    v5 = get_classifier("cues_v5")
    assert all(B in present(label) for label in v5.classify(GUARDED))


@pytest.mark.parametrize(
    "text, expected",
    [
        # What still revises under the guarded cues.
        ("Wait, actually the radius is 5.", {B}),
        ("Maybe there's a better approach: let me use symmetry instead.", {B}),
        ("This is a dead end, so let me go back to the start.", {B}),
        ("Oops, my mistake: 7 * 8 is 56.", {B}),
        ("12 + 7 = 19. No luck.", {B}),
        # The goal reduced to what suffices; a wanted outcome, then what it needs; a prerequisite.
        ("All I have to do is show that the second diagram is a pullback.", {S, C}),
        ("Thus we may reduce to the case A = Z.", {S, C}),
        ("If you want non-trivial invariants of oriented links, you'd need theta = id.", {C}),
        ("For that to be a full octave we need x^n = 2.", {C}),
        ("This is required for us to be able to speak of lax transformations.", {C}),
    ],
)
def test_families(v6, text, expected):
    assert present(v6.classify([text])[0]) == expected


# The backtracking cues v6 guards, by their exact pattern.
GUARDED_PATTERNS = {
    "wait",
    "maybe|perhaps there 's|is a better|simpler|easier|cleaner|smarter way|approach|method",
    "go|going|went back to|and the|my|this|that|square|step|start|beginning|previous|earlier|original",
    "my mistake|bad|error|miscalculation|typo",
    "no luck|dice|go",
}


def test_v6_is_v5_with_guards_plus_its_additions():
    v5, v6 = read_version("cues_v5"), read_version("cues_v6")
    found = diff(v5, v6)
    assert (len(found.added), found.dropped) == (9, ())
    assert v6.cues[len(v5.cues) :] == found.added
    assert {(new.behavior, new.pattern) for _, new in found.changed} == {(B, p) for p in GUARDED_PATTERNS}
    # Only context rules change: what must not come next or before, and questions.
    fields = set().union(*(changed_fields(old, new) for old, new in found.changed))
    assert fields == {"unless_then", "unless_before", "not_in_question"}


def test_countdown_targets_still_hold(v6):
    assert_countdown_targets(v6)

