"""cues_v7's Countdown families, in short traces of this file's own (none copied from round 7), the look-alikes they
must not read, and the version rule: v7 is v6 plus its additions, and the Countdown targets of the cue tests hold."""

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cue_rules import diff, read_version
from tests.support.cue_checks import B, C, S, V, assert_countdown_targets, present


@pytest.fixture(scope="module")
def v7():
    return get_classifier("cues_v7")


@pytest.mark.parametrize(
    "text, expected",
    [
        # A result judged in its own sentence; with a new attempt after it, abandoned too.
        ("<think> 9 * 6 = 54, 54 + 2 = 56 no\n9 * 2 = 18, 18 + 6 = 24 </think>", {V, B}),
        ("(12 - 3) * 4 = 36 no.", {V}),
        # The target taken apart around a part that is then built or sought.
        ("72 = 8 × 9, and 9 = 12 - 3. So 8 × (12 - 3) = 72.", {S, C}),
        ("hmm 56 = 7 * 8, 8 = 2 * 4", {S, C}),
        ("90 = 15 × 6, but 6 isn't easy from 4 and 11.", {S, C}),
        # A value set out to be built.
        ("27 + 4 = 31, can I make 4 from the rest?", {S}),
        # Checks against the problem's conditions, and a search closed against the target.
        ("(7 + 3) × 3 isn't allowed, there is only one 3.", {V}),
        ("None of these give 89.", {V}),
    ],
)
def test_countdown_families(v7, text, expected):
    assert expected <= present(v7.classify([text])[0])


@pytest.mark.parametrize(
    "text",
    [
        # Two numbers factored side by side, and a forward computation repeated: no part is pursued.
        "The GCD of 14 and 100 is 2, since 14 = 2 * 7 and 100 = 2 * 50.",
        "25 = 81 + 6², so 25 = 81 + 36, which is false.",
        # A solution recognised, not a requirement derived.
        "Since 42 = 6 × 7, I can use just 6 and 7.",
        # "no" that judges nothing just computed.
        "There is no x = 3 solution here.",
    ],
)
def test_look_alikes_are_not_read(v7, text):
    assert not present(v7.classify([text])[0]) & {S, C, B}


def test_v7_is_v6_plus_its_additions():
    """v6 stays as reported: v7 appends its 16 cues and changes none of v6's."""
    v6, v7 = read_version("cues_v6"), read_version("cues_v7")
    found = diff(v6, v7)
    assert (len(found.added), found.changed, found.dropped) == (16, (), ())
    assert v7.cues == v6.cues + found.added


def test_countdown_targets_still_hold(v7):
    assert_countdown_targets(v7)

