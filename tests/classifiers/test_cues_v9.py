"""cues_v9's Countdown verdicts and first-part pursuits, in short traces of this file's own (none copied from round 9),
the look-alikes they must not read, and the version rule: v9 is v8 plus its additions."""

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cue_rules import diff, read_version
from tests.support.cue_checks import B, C, S, V, assert_countdown_targets, present


@pytest.fixture(scope="module")
def v9():
    return get_classifier("cues_v9")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think> 20 + 9 = 29, 29 + 3 = 32. Not enough. 20 * 3 = 60 - 9 = 51 </think>", {V, B}),
        ("12 from 5 and 4? no. 12 = 8 + 4, so 8 from 5 and 3.", {V, B}),
        ("44/4 = 11. no 11. 4 * 11 = 44 then", {V}),
        ("76 = 19*4, 19 = 16 + 3. So (16 + 3) * 4 = 76.", {S, C}),
        ("hmm 91 = 7*13. 7 = 10 - 3 and 13 is given.", {S, C}),
    ],
)
def test_countdown_families(v9, text, expected):
    assert expected <= present(v9.classify([text])[0])


@pytest.mark.parametrize(
    "text",
    [
        # Two numbers factored side by side: the second left side is neither part of the first.
        "Since 15 = 3*5, 14 = 2*7.",
        # "not enough" about something other than a result, with no new attempt.
        "I did not have enough time to finish the proof.",
    ],
)
def test_look_alikes_are_not_read(v9, text):
    assert not present(v9.classify([text])[0]) & {S, C, B}


def test_v9_is_v8_plus_its_additions():
    """v8 stays as reported: v9 appends its 10 cues and changes none of v8's."""
    v8, v9 = read_version("cues_v8"), read_version("cues_v9")
    found = diff(v8, v9)
    assert (len(found.added), found.changed, found.dropped) == (10, (), ())
    assert v9.cues == v8.cues + found.added


def test_countdown_targets_still_hold(v9):
    assert_countdown_targets(v9)

