"""cues_v3's cue families, each with the look-alikes it must not count, and Countdown traces in three styles.

countdown_traces.jsonl holds traces written for these tests (none from a model, none from the blind set): terse and
looping ones in the style of a small model during RL, priming traces in the style of a strong model, and near-misses
(the task statement, an unchecked wrong answer, steps that are only computations). Its labels follow the boundary
rules of issue 17 (a gap stated as a verdict is verification, a gap turned into a requirement is backward chaining)
and the blind set's adjudicated conventions (evals/blindset/GUIDE.md): a failure verdict followed by a new attempt
abandons the failed one, and a requirement such as "we need 22 from 11 and 2" is also the next intermediate goal.
"""

import pytest

from curate.classifiers import get_classifier
from tests.support.cue_checks import B, C, S, V, assert_countdown_targets, present, read_traces


@pytest.fixture(scope="module")
def v3():
    return get_classifier("cues_v3")


@pytest.mark.parametrize(
    "text, expected",
    [
        # Countdown verdicts: the result against the target is a check, and only a check.
        ("14 is not 24.", {V}),
        ("95 - 3 = 92, 92 - 21 = 71, not 88.", {V}),
        ("This sequence results in 1, which is not equal to 22.", {V}),
        ("21 * 3 = 63, 63 + 95 = 158, too high.", {V}),
        ("That's too high.", {V}),
        ("Too low!", {V}),
        ("80 + 11 = 91. That's 2 short.", {V}),
        ("60 is close to 64 but not quite.", {V}),
        ("This works!", {V}),
        ("38 + 12 + 45 = 95, which is our target.", {V}),
        ("We are over by 4.", {V}),
        ("30 exceeds the target.", {V}),
        # A terse verdict on the number just written.
        ("16 * 4 = 64. 64 - 3 = 61. almost.", {V}),
        # Changes of attempt; a failure verdict followed by a new attempt abandons the failed one.
        ("86 + 5 = 91, not 81. 67 + 19 - 5 = 81.", {V, B}),
        ("Let me try again.", {B}),
        ("Let's try a different sequence of operations.", {B}),
        ("We need to try another combination.", {B}),
        # Intermediate targets.
        ("Let's try to reach 20 since it is a multiple of 10.", {S}),
        ("First, I'll try to get close to 24.", {S}),
        # From the target back, and a gap turned into a requirement.
        # "we need 25 from 50 and 2" is also the next intermediate goal (a reduction may be both).
        ("Since the target is 22, and 22 + 3 = 25, we need 25 from 50 and 2.", {S, C}),
        ("Numbers: [5, 6, 11, 2], target: 64\n\n64 = 8 × 8 = 4 × 16.", {C}),
        ("Working from the target, 24 = 4 * 6.", {C}),
        ("What times 3 gives 24?", {C}),
        ("We need 3 more.", {C}),
        ("So we must subtract 3.", {C}),
        ("If 4 comes last, the others must make 6.", {C}),
        ("The last operation must be a multiplication by 4.", {C}),
        ("The target 24 can be written as 3 * 8.", {C}),
        # Goal-to-requirement in proofs.
        ("For the inequality to hold, we need a > b.", {C}),
        ("It is enough to prove that f is injective.", {C}),
        ("It suffices to show that f is injective.", {C}),
        ("We must have a = b for the equality case.", {C}),
        ("For a to be an integer, b - 1 must divide k(k - 1).", {C}),
        ("To minimize a + b, I need to choose the smallest possible a.", {C}),
        ("The main problem reduces to the assertion that the functor is monadic.", {C}),
        ("They need to stay in the oven for another 300 - 45 = 255 seconds.", {C}),
        # Re-deriving to confirm is a check.
        ("Wait, let me add them again: 1 + 2 + 3 = 6.", {V}),
        ("Let me recompute that: 7 * 8 = 56.", {V}),
        ("Maybe I miscounted the groups.", {V}),
    ],
)
def test_families(v3, text, expected):
    assert present(v3.classify([text])[0]) == expected


@pytest.mark.parametrize(
    "text",
    [
        # "suffice" meaning "be enough", and an argument declared complete.
        "This suffices.",
        "One example will suffice.",
        "This is enough to prove the claim.",
        "The bound is not quite good enough to find the constant.",
        # Restating what the problem asks.
        "Our goal is to reach 24 using 3, 5, 7 and 9.",
        "We need to make 24 using the numbers 3, 5, 7, 9.",
        # Unfolding a definition.
        "To find the inverse of 7 modulo 50, I need to find an integer v such that 7v ≡ 1 (mod 50).",
        "To find f^{-1}(6), I need to know what value of x satisfies f(x) = 6.",
        # Computations set no goal; a condition checks nothing; a procedure is not a requirement.
        "Step 1: 95 - 21 = 74",
        "First, let's try 53 + 41 = 94.",
        "If x is not 0, then we can divide by x.",
        "So we need to subtract 3 from both sides.",
        "Consider another set S of primes.",
        "The oven is off by 18 degrees because 468 - 450 = 18.",
        "Since sqrt(20) is approximately 4.472, which is close to 4.5, the ceiling is 5.",
        "12 can be written as 3 * 4.",
        "The fraction reduces to 3/4.",
        "This fraction can be reduced to $\\frac{3}{4}$.",
        "Compute the gcd:\n7921 = 316*25 + 21\n25 = 1*21 + 4",
        "We need to make 24 from the numbers 3, 5, 7 and 9.",
        "The price went over by 5 dollars.",
    ],
)
def test_named_negatives(v3, text):
    assert present(v3.classify([text])[0]) == set()


def test_a_gap_is_a_verdict_not_a_requirement(v3):
    assert present(v3.classify(["We are 3 away from the target."])[0]) == {V}
    assert present(v3.classify(["We need 3 more to reach the target."])[0]) == {C}


def test_v2_keeps_its_reading():
    """cues_v2 is a versioned name: "That's too high." stays verification and backtracking there."""
    assert present(get_classifier("cues_v2").classify(["That's too high."])[0]) == {V, B}


def test_countdown_traces(v3):
    assert {t["style"] for t in read_traces()} == {"rl_small", "strong", "near_miss"}
    assert_countdown_targets(v3)
