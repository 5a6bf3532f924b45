"""cues_v4's cue families and guards, in short sentences in each family's own words, plus the version rules: 'cues'
still names cues_v3, v3 keeps its reading, the prefilter changes nothing, and the Countdown targets still hold."""

import pytest

from curate.classifiers import get_classifier, resolve_name
from curate.classifiers.cue_rules import read_version
from curate.classifiers.cues import LineCueClassifier
from tests.support.cue_checks import B, C, S, V, assert_countdown_targets, present


@pytest.fixture(scope="module")
def v4():
    return get_classifier("cues_v4")


@pytest.mark.parametrize(
    "text, expected",
    [
        # "Wait" that says what was wrong abandons it; one that asks or re-derives checks.
        ("Wait, no, I read the question wrong.", {B}),
        ("Wait, that's not right.", {B}),
        ("Wait, I think we should subtract the border points first.", {B}),
        ("Wait, actually the radius is 5.", {B}),
        ("Wait, is that right?", {V}),
        ("Wait, let me add them again.", {V}),
        ("Wait, perhaps I miscounted the groups.", {V}),
        # Another approach taken to confirm a result checks it.
        ("Let me consider another approach to confirm this.", {V}),
        ("Just to be thorough, let's try another method.", {V}),
        # A candidate rejected by its verdict.
        ("So n = 12 doesn't work.", {V}),
        ("The sum is 39, which is over.", {V}),
        # v1's two-word alternatives, now cues of their own.
        ("That doesn't make sense.", {V}),
        ("This does not match the given 936 values.", {V}),
        ("The sum of the roots is 0, which is consistent with 1 + 2 + 3 - 6 = 0.", {V}),
        # An error declared with certainty.
        ("I must have made a mistake in the expansion.", {B}),
        ("We must have miscalculated the area.", {B}),
        ("There's a slight error in our formula.", {B}),
        # A plan laid out: numbered bold steps, cases, two stages.
        ("1. **Define Variables:**\n   Let r be the radius.\n2. **Set Up the Equation:**\n   Then 2r = 10.", {S}),
        ("Case 1: x is negative.", {S}),
        ("We consider two cases.", {S}),
        ("I need to find the sum and then find its remainder mod 9.", {S}),
        ("First find the wait in minutes: 3 * 2 = 6 minutes\nThen convert it to seconds: 6 * 60 = 360 seconds", {S}),
        ("To begin with, let's find the domain.", {S}),
        ("Then we need to find the remainder.", {S}),
        # A reduction to an intermediate claim, also without a comma.
        ("If I can show that the kernel is trivial then I would be done.", {S, C}),
        ("Now if I can show that the kernel is 0 then I would be done, but I don't see how.", {S, C}),
        # What the goal requires.
        ("If you want to linearize the system, you would need a stable basis state.", {C}),
        ("But in order to see that the composites agree, you will need to add more arrows.", {C}),
        ("A necessary condition for the bracket to vanish is that the fields are isotropic.", {C}),
        ("This only works if C is nonempty.", {C}),
        ("So 96 men are required to complete the work in half a day.", {C}),
        # Countdown: a property of the target as a requirement, a piece still to make, a new expression instead.
        ("Reaching 27 requires a multiplication, since the sum is only 17.", {C}),
        ("7 × 3 = 21 is one piece; then the other piece must be 4.", {C}),
        ("12 + 7 = 19, not quite. 12 + 5 + 3 = 20.", {V, B}),
        ("Instead, 8 × 2 = 16 and 16 + 6 = 22.", {B}),
        ("Let me back up.", {B}),
        ("All too small, so I need a product of a sum.", {S}),
    ],
)
def test_families(v4, text, expected):
    assert present(v4.classify([text])[0]) == expected


@pytest.mark.parametrize(
    "text",
    [
        # "Wait" that pauses the narration, weighs a point or looks at an option abandons nothing.
        "Wait, since AB is the diameter, the angle at C is 90 degrees.",
        "Wait, perhaps I can use the formula for the angle between two lines.",
        "Wait, maybe there are no solutions for p = 17.",
        "Wait, I already did that.",
        # Hedged or blamed elsewhere: no revision of one's own work.
        "That gives 2 * 38650 unless I made a mistake.",
        "There's a mistake in the problem statement.",
        # A heading that is not numbered, a case in passing, a plan verb with no second stage.
        "**Note** the domain is all reals.",
        "In this case the sum is 5.",
        "I need to find the sum of the digits.",
        "First find the total: 3 * 2 = 6.\n#### 6",
        # An idiom, an exposition, a conditional consequence, notation.
        "I found these notes a good place to start with.",
        "Let me start with a remark.",
        "If we switch the two factors, then we will have a larger product.",
        "The cokernel pair is a quotient; then I'll write y_0 for its elements.",
        "Instead of this, the sum of 2 and 3 is 5.",
        # A question about conditions asks; it derives nothing.
        "What is a necessary condition for convergence?",
    ],
)
def test_named_negatives(v4, text):
    assert present(v4.classify([text])[0]) == set()


def test_a_numbered_heading_counts_once_per_line(v4):
    text = "Plan.\n1. **The radius:** r = 5\n2. **Find the area**\nThe area is 25 pi.\n3) **Units**"
    labels = v4.classify([text])[0]
    # Read apart from the classifier: the lines that open with a number, a dot or bracket, and a bold run.
    starts = [i for i, line in zip(_line_starts(text), text.split("\n")) if line[:1].isdigit() and "**" in line[:6]]
    assert labels.counts[S] == len(starts) == 3
    # One instance per heading line, whether the line cue or v2's heading verb ("Find") found it.
    lines = sorted({max(i for i in starts if i <= e.start) for e in labels.evidence if e.behavior == S})
    assert lines == starts


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for line in text.split("\n")[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    return starts


def test_versions():
    """v4 keeps its name; v3 keeps its reading of the phrasings v4 changed."""
    assert resolve_name("cues_v4") == ("cues_v4", None)
    assert get_classifier("cues_v4").name == "cues_v4"
    v3 = get_classifier("cues_v3")
    assert present(v3.classify(["Wait, since AB is the diameter, the angle at C is 90 degrees."])[0]) == {B}
    assert present(v3.classify(["Let me consider another approach to confirm this."])[0]) == {B}


def test_prefilter_changes_nothing_on_headings():
    """The line cues read the whole text, the engine's cues only the prefiltered lines: labels agree either way (the
    real-text sample is test_prefilter's, for every cues_vN); here the lines only a line cue reads."""
    texts = [
        "1. **Define Variables:**\n   Let r be",
        "x" * 50 + "\nWait, no.\n2. **Solve**\nplain line\n3) **Check the units**",
        "Plain text.\n\n10. **Last step** done\n",
        "",
    ]
    version = read_version("cues_v4")
    plain = LineCueClassifier(cues=version.cues, name="cues_v4", prefilter=False,
                              line_cues=version.line_cues).classify(texts)
    filtered = LineCueClassifier(cues=version.cues, name="cues_v4", prefilter=True,
                                 line_cues=version.line_cues).classify(texts)
    assert plain == filtered
    assert [lab.counts[S] for lab in plain] == [1, 2, 1, 0]


def test_countdown_traces(v4):
    """The issue's Countdown targets, as test_cues_v3 checks them for v3: v4's real-text changes keep them."""
    assert_countdown_targets(v4)
