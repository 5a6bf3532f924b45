"""cues_v11's words of a check (a result declared checked, a computation redone, a result set against what was
wanted, the numbers used set against those given), in short traces of this file's own (none copied from round 11),
the look-alikes they must not read, and the version rule: v11 is v10 plus its additions."""

import pytest

from curate.classifiers import get_classifier, resolve_name
from curate.classifiers.cue_rules import diff, read_version
from tests.support.cue_checks import V, assert_countdown_targets, present


@pytest.fixture(scope="module")
def v11():
    return get_classifier("cues_v11")


@pytest.mark.parametrize(
    "text",
    [
        "<think> 9 * 7 = 63, 63 + 4 = 67, confirmed. </think>",
        "So (30 - 6) / 4 = 6. Verified.",
        "Recalculating from the start: 8 * 5 = 40, 40 - 2 = 38.",
        "Re-evaluating in the other order: 40 - 2 = 38.",
        "(12 + 3) * 2 = 30, which is what we need.",
        "Halving 44 gives 22, as needed.",
        "That uses all the numbers once.",
        "Every step holds up: 8 * 5 is 40.",
    ],
)
def test_checks_in_plain_words(v11, text):
    assert V in present(v11.classify([text])[0])


@pytest.mark.parametrize(
    "text",
    [
        # The rule of the game, not a check of an answer.
        "You may use each number only once.",
        # A count of digits, not the numbers of a solution.
        "The digits 1, 4 and 7 each appear once in the code.",
        # "confirmed" about something other than a result just written.
        "The meeting was confirmed by email.",
        # A re- verb that redoes nothing ("re-add" of an ingredient is not in the list; "readme" is one word).
        "I re-read the readme and started.",
    ],
)
def test_look_alikes_are_not_read(v11, text):
    assert V not in present(v11.classify([text])[0])


def test_v11_is_v10_plus_its_additions():
    """v10 stays as reported: v11 appends its 8 cues and changes none of v10's."""
    v10, v11 = read_version("cues_v10"), read_version("cues_v11")
    found = diff(v10, v11)
    assert (len(found.added), found.changed, found.dropped) == (8, (), ())
    assert v11.cues == v10.cues + found.added


def test_countdown_targets_still_hold(v11):
    assert_countdown_targets(v11)


def test_cues_v11_keeps_its_name():
    """cues_v11 was the default until round 14 (cues_ngram_v1 since, tests/core/test_behaviors.py); it and the older
    versions keep their names and output."""
    assert get_classifier("cues_v11").name == "cues_v11"
    assert [resolve_name(f"cues_v{n}")[0] for n in range(1, 12)] == [f"cues_v{n}" for n in range(1, 12)]
