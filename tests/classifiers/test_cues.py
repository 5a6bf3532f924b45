"""The cue classifier on phrasing as it appears in real traces, forum posts and worked solutions."""

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cues import CHUNK_CHARS


@pytest.fixture(scope="module", params=["cues_v1", "cues_v2", "cues_v3", "cues_v4", "cues_v5", "cues_v6", "cues_v7", "cues_v8", "cues_v9", "cues_v10", "cues_v11", "cues_v12"])
def cues(request):
    return get_classifier(request.param)


def present(labels):
    return {b for b, n in labels.counts.items() if n}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Wait, that can't be right. 75 - 25 = 50, not 48. Let me try another combination.", {"backtracking"}),
        ("Hmm, I made an arithmetic error above: the sign should flip.", {"backtracking"}),
        ("Let me double-check: 3 * 16 = 48, which matches the target.", {"verification"}),
        ("Plugging x = 2 back into the original equation gives 0, as required.", {"verification"}),
        ("First, we find the radius of the circle. Then we will compute the area.", {"subgoal_setting"}),
        ("How many clips did Natalia sell in May? ** Natalia sold 48/2 = 24 clips in May.", {"subgoal_setting"}),
        ("It suffices to show that f is injective.", {"backward_chaining"}),
        ("To get 24, we need 4 * 6, so I need to make 6 from 2 and 3.", {"backward_chaining"}),
        ("Working backwards from the answer, the last step must have been a doubling.", {"backward_chaining"}),
    ],
)
def test_behaviors_found(cues, text, expected):
    assert expected <= present(cues.classify([text])[0])


@pytest.mark.parametrize(
    "text",
    [
        "How do I check whether this series converges? Is there a way to verify it numerically?",
        "She wrote a check for $50 and deposited it in her checking account.",
        "We wait until the process hits zero, then stop.",
        "Actually, this is a well-known result due to Hardy.",
        "First-order logic is complete. The area of the circle is $\\pi r^2$.",
        "It suffices to note that the map is continuous.",
    ],
)
def test_hard_negatives(cues, text):
    assert present(cues.classify([text])[0]) == set()


def test_counts_sentences_and_evidence_points_at_the_cue(cues):
    text = "Wait, that's not right. Wait, I dropped a sign. OK so x = 3."
    labels = cues.classify([text])[0]
    assert labels.counts["backtracking"] == 2  # one per sentence, though the first has two cues
    spans = [text[e.start:e.end] for e in labels.evidence if e.behavior == "backtracking"]
    assert spans == ["Wait", "Wait"]
    assert labels.error is None
    assert labels.counts["verification"] == 0  # known zero, not unknown


def test_wait_to_verify_counts_as_verification(cues):
    labels = cues.classify(["Wait, let me double-check that computation."])[0]
    assert labels.counts["verification"] >= 1
    assert labels.counts["backtracking"] == 0


def test_long_document_is_chunked_with_correct_offsets(cues):
    filler = ("The sum of the first n odd numbers is n squared.\n" * (CHUNK_CHARS // 40))
    text = filler + "Oops, I made a mistake there.\n" + filler
    labels = cues.classify([text])[0]
    assert len(text) > 2 * CHUNK_CHARS
    spans = [text[e.start:e.end] for e in labels.evidence if e.behavior == "backtracking"]
    assert spans and spans[0].lower().startswith(("oops", "i made"))


def test_batch_order_is_kept(cues):
    texts = ["Wait, that's wrong.", "Nothing here.", "It suffices to show x > 0."]
    results = cues.classify(texts)
    assert [sorted(present(r)) for r in results] == [["backtracking"], [], ["backward_chaining"]]


def test_every_literal_cue_matches_its_own_phrase(cues):
    """Guards the routing of patterns between the PhraseMatcher and the Matcher."""
    from spacy.tokens import Doc

    from curate.classifiers.cue_rules import read_version
    from curate.classifiers.cues import spellings

    for key, cue in cues.cues.items():
        words = cue.pattern.split()
        if cue.pattern == "?" or any(w.removesuffix("?") in ("NUM", "*") or w.startswith("ANY{") for w in words):
            continue
        phrase = next(spellings(words))
        doc = Doc(cues.nlp.vocab, words=list(phrase))
        found = {cues.nlp.vocab.strings[m] for m, _, _ in [*cues.phrases(doc), *cues.matcher(doc)]}
        assert key in found, (cue.pattern, phrase)
    assert tuple(cues.cues.values()) == read_version(cues.name).cues


@pytest.mark.parametrize(
    "text, expected",
    [
        # A "Wait" question stops to check, it does not abandon; "Wait, but ..." weighs a consideration.
        ("Wait a minute, is that right? Let me double-check.", {"verification"}),
        ("Wait, but the problem asks for the answer in simplest radical form.", set()),
        # Exposition and computation after "First," or "Let's start by", and a bare "break this down", plan nothing.
        ("First, recall that a group is a set with an associative operation.", set()),
        ("First, I need to understand what a path on the grid means.", set()),
        ("Let's start by understanding what a divisor is.", set()),
        ("Okay, let's break this down.", set()),
        ("1. **Finding the radius**: the radius is half the diameter, so r = 6.", {"subgoal_setting"}),
        # Revisions that name what was wrong; stalls followed by a change of tack.
        ("Actually, that calculation was wrong: 7 * 8 = 56.", {"backtracking"}),
        ("Actually, that was a mistake. 1 is not prime.", {"backtracking"}),
        ("This approach isn't leading me anywhere. Maybe there's a better way.", {"backtracking"}),
        ("This is getting too messy, let me think differently.", {"backtracking"}),
        ("Oops! Of course you're right, I was confused.", {"backtracking"}),
        # Reductions of the goal; a procedure is not a target.
        ("So, if I can find cos R, then sin T = cos R.", {"backward_chaining"}),
        ("Now we just need to find the volume of the cylinder.", {"subgoal_setting", "backward_chaining"}),
        ("What you should show is that the limit holds for every test function.", {"backward_chaining"}),
        ("To find the envelope, we need to differentiate this equation with respect to t.", set()),
        ("Just to be thorough, let's compute it another way.", {"verification"}),
    ],
)
def test_cues_v2_families(text, expected):
    assert present(get_classifier("cues_v2").classify([text])[0]) == expected


def test_cues_v1_is_unchanged_by_v2():
    """cues_v1 is a versioned name: the phrasings v2 reads differently keep v1's reading."""
    v1 = get_classifier("cues_v1")
    assert present(v1.classify(["Wait a minute, is that right?"])[0]) == {"backtracking"}
    assert present(v1.classify(["First, recall that a group is a set."])[0]) == {"subgoal_setting"}
    assert present(v1.classify(["Now we just need to find the volume of the cylinder."])[0]) == set()
