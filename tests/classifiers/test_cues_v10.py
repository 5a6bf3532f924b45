"""cues_v10's bare "not T" and "... no" verdicts and its pursuits of a part of a target taken apart in several ways,
in short traces of this file's own (none copied from round 10), the look-alikes they must not read, and the version
rule: v10 is v9 plus its additions."""

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cue_rules import diff, read_version
from tests.support.cue_checks import B, C, S, V, assert_countdown_targets, present


@pytest.fixture(scope="module")
def v10():
    return get_classifier("cues_v10")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think> 12*5 = 60, 60 + 3 = 63. 63 not 61. 12*4 = 48 + 13 </think>", {V, B}),
        ("<think> 40 + 8 = 48, 48 - 2... nope. 40 / 8 = 5, 5 * 2 = 10 </think>", {V, B}),
        ("84 = 12*7 = 21*4. 21 = 18 + 3, and 4 is given.", {S, C}),
        ("90 = 9 * 10 = 6 * 15.\nTry 6 * 15: 15 from 11, 4? 11 + 4 = 15.", {S, C}),
        ("Goal 3 * 22: 22 from 30 and 8? 30 - 8 = 22.", {S, C}),
    ],
)
def test_countdown_families(v10, text, expected):
    assert expected <= present(v10.classify([text])[0])


@pytest.mark.parametrize(
    "text, expected_absent",
    [
        # A count, not a verdict on a result.
        ("The box holds 3 not 4 apples, as the label says.", {V, B}),
        # Forward arithmetic: each line computes from given numbers, nothing is taken apart.
        ("7 * 8 = 56, 56 + 9 = 65. 5 * 3 = 15. 15 * 4 = 60 + 2 = 62", {S, C}),
        # Two factorizations side by side: the second left side is no part of the first.
        ("Since 84 = 12*7, 15 = 3*5.", {S, C}),
        # "from" after a number that is no part of what came before.
        ("84 = 12*7. 5 from the left, we count 30 from 6 rows.", {S, C}),
    ],
)
def test_look_alikes_are_not_read(v10, text, expected_absent):
    assert not present(v10.classify([text])[0]) & expected_absent


def test_v10_is_v9_plus_its_additions():
    """v9 stays as reported: v10 appends its 8 cues and changes none of v9's."""
    v9, v10 = read_version("cues_v9"), read_version("cues_v10")
    found = diff(v9, v10)
    assert (len(found.added), found.changed, found.dropped) == (8, (), ())
    assert v10.cues == v9.cues + found.added


def test_countdown_targets_still_hold(v10):
    assert_countdown_targets(v10)

