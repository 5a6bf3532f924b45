"""cues_v5's cue families and guards, in short sentences in each family's own words, plus the version rules: cues_v4
keeps its reading of what v5 adds, and the Countdown targets still hold."""

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cue_rules import diff, read_version
from tests.support.cue_checks import C, S, V, assert_countdown_targets, present


@pytest.fixture(scope="module")
def v5():
    return get_classifier("cues_v5")


FAMILIES = [
    # A gap turned into a requirement, with the subtraction that measures it.
    ("Dora needs $19 - $18 = $1 more for the ball.", {C}),
    ("This means we need 140-70 = 70 new items to double the size.", {C}),
    ("The last student must score at least 850 - 780 = 70.", {C}),
    ("Kayla will have to wait for 18 - 13 = 5 more years to start driving.", {C}),
    # A purpose clause, then what it needs, of anyone and of any thing.
    ("To obtain critical properties, you need the correlator.", {C}),
    ("To get the inverse, you would need u = exp(-x^2/2), which does not have compact support.", {C}),
    ("To save $2000, she would need 2 weeks of wages.", {C}),
    ("To complete the work in 6 days, 8 men are required.", {C}),
    # "For X to hold, Y should ...".
    ("For the mixture to be in equal quantities, there should be 2 kg of clay removed.", {C}),
    # A hypothetical requirement; the goal replaced by an equivalent one.
    ("The ratio of the half octave interval would need to be the square root of 2.", {C}),
    ("This would require either a = 0 or c = 0.", {C}),
    ("To maximize the area, we can maximize its square.", {C}),
    # Checks against the problem's conditions.
    ("Case 3 gives x = 5, which does not satisfy the second equation.", {V}),
    ("But this violates the condition that every column has one color.", {V}),
    ("So the average is 94.5, which is not an integer.", {V}),
    ("Everything seems consistent.", {V}),
    # One intermediate goal announced; a goal reduced to another.
    ("First, let's consider the range of possible k values.", {S}),
    ("We can do that by finding the largest possible value for m.", {S, C}),
]


@pytest.mark.parametrize("text, expected", FAMILIES)
def test_families(v5, text, expected):
    assert present(v5.classify([text])[0]) == expected


@pytest.mark.parametrize(
    "text",
    [
        # A method or an operation on known values, not a requirement.
        "To find the y-intercepts, I need to set x to zero and solve for y.",
        "To find the envelope, we need to differentiate this equation with respect to a.",
        # A difference further away, in another clause, or one to compute.
        "Four less than the number of small students need size medium, or 22-4 = 18 students.",
        "I need to compute the product of 2 - 2w^k over all k.",
        "So, required difference = 9920-1040 = 8880.",
        # A verdict on effort, the set a condition describes, a reading of the problem.
        "That would require a lot of work.",
        "The number of colorings that satisfy the condition is 16.",
        "First, I need to understand what a y-intercept is.",
    ],
)
def test_named_negatives(v5, text):
    assert present(v5.classify([text])[0]) == set()


def test_v5_is_v4_plus_its_additions():
    """v4 stays as reported on round 2: v5 appends its 19 cues and changes none of v4's."""
    old, new = read_version("cues_v4"), read_version("cues_v5")
    found = diff(old, new)
    assert (len(found.added), found.changed, found.dropped) == (19, (), ())
    assert new.cues == old.cues + found.added
    v4 = get_classifier("cues_v4")
    assert [present(label) for label in v4.classify([text for text, _ in FAMILIES[:12]])] == [set()] * 12


def test_countdown_targets_still_hold(v5):
    assert_countdown_targets(v5)
