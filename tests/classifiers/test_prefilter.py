"""The prefilter changes nothing: every cues_vN gives the same Labels with and without it, on real text of every genre.

Labels are compared directly (counts, evidence offsets and order, error): the attribute row is written from them
alone, so equal Labels are byte-identical rows, and skipping the pipeline keeps the run short.
"""

import json
import re

import pytest

from curate.classifiers.base import get_classifier, registered_names
from curate.classifiers.cue_patterns import last_visible_class
from curate.classifiers.cue_rules import read_version
from curate.classifiers.cues import CHUNK_CHARS, Cue, CueClassifier
from curate.classifiers.prefilter import Prefilter
from tests.support.real_mix import write_real_mix
from tests.support.shared import SHARED_DATA

CUES = read_version("cues_v1").cues

# Every registered cues_vN, so that a new version is checked too.
VERSIONS = sorted(name for name in registered_names() if re.fullmatch(r"cues_v\d+", name))


def real_texts(data, tmp_path, per_source=None):
    path = tmp_path / "mix.jsonl"
    write_real_mix(data, path, per_source=per_source)
    return [json.loads(line)["text"] for line in path.read_text().split("\n") if line]


def assert_same(version, texts):
    """The version's own classifier class (cues_v4 adds line cues to the engine's labels), with its cue list."""
    registered = get_classifier(version)
    cues = tuple(registered.cues.values())
    plain = type(registered)(cues=cues, name=version, prefilter=False).classify(texts)
    filtered = type(registered)(cues=cues, name=version, prefilter=True).classify(texts)
    different = [i for i, (a, b) in enumerate(zip(plain, filtered)) if a != b]
    assert len(plain) == len(filtered) == len(texts)
    assert not different, f"{len(different)} texts differ, first {texts[different[0]][:200]!r}"


@pytest.fixture(scope="module")
def sample_texts(tmp_path_factory):
    """The real sample, read once for all versions: 20 texts per source and genre (about 1 MB, every Sky-T1 trace
    genre among them). The engine every version shares is checked on the whole mix by the newest version below; this
    sample checks each version's own cue list, twelve versions at about 5 s each."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (set CURATE_SHARED_DATA)")
    return real_texts(SHARED_DATA, tmp_path_factory.mktemp("prefilter"), per_source=20)


@pytest.mark.parametrize("version", VERSIONS)
def test_same_labels_on_a_sample_of_every_genre(sample_texts, version):
    assert len(sample_texts) >= 200
    assert_same(version, sample_texts)


# The whole mix for the newest version, the one still being revised; the older ones are frozen (byte-identical
# output, passed on the whole mix when they were newest) and keep the genre sample above, which saves CI minutes.
CURRENT_VERSIONS = [max(VERSIONS, key=lambda v: int(v.removeprefix("cues_v")))]


@pytest.mark.slow
@pytest.mark.parametrize("version", CURRENT_VERSIONS)
def test_same_labels_on_every_real_text(shared_data, tmp_path, version):
    """All of the mix (over 10,000 texts, every Sky-T1 trace among them)."""
    texts = real_texts(shared_data, tmp_path)
    assert len(texts) >= 10_000
    assert_same(version, texts)


TRICKY = [
    "",
    "   \n\n  ",
    "  Wait, that is wrong.\n",
    "\n\n\tWait, that's not right.\r\nNo. That is wrong.  \n  Let me check: 2 + 2 = 4.",
    "The checK is wrong.\nWait, that’s not right.",  # Kelvin sign: lower() keeps the length, maps it to k
    "İstanbul. Wait, that is wrong. ΑΣ Let me check.",  # İ lowers to two characters: no prefilter
    "How many clips did she sell in May?\n** She sold 24.",  # the '?' cue reads two tokens into the next line
    "How many?\n\n\n**",
    "61. almost.\n52.\n\n\n\nno.",
    "We get 23, not 24.\n" + "x " * 200 + "\n(3 + 4) * 2 = 14",  # `later` reaches past the next line
    "It suffices to\nnote that f is injective.",
    ("filler text without cues here " * 20 + "\n") * (CHUNK_CHARS // 300) + "Oops, I made a mistake.\n" * 3,
    "x" * (CHUNK_CHARS + 10) + " Wait, that is wrong.",
]


@pytest.mark.parametrize("version", VERSIONS)
def test_same_labels_on_edge_cases(version):
    assert_same(version, TRICKY)


NEW = Cue("backtracking", "flibbertigibbet moment")
TEXT = "Zebras graze.\nZany flibbertigibbet moment indeed.\nZebras sleep."


def kept_text(classifier: CueClassifier, text: str) -> str:
    return "".join(text[b:e] for b, e in classifier.prefilter.select(text).regions)


@pytest.fixture(scope="module")
def v1():
    return CueClassifier(cues=CUES, name="cues_v1", prefilter=True)


def test_a_new_cue_is_seen_by_the_prefilter(v1):
    """The prefilter is built from the cue list: a line it dropped before the cue existed is kept once it does."""
    assert "moment" not in kept_text(v1, TEXT)
    with_new = CueClassifier(cues=(*CUES, NEW), name="cues_v1+new", prefilter=True)
    assert "flibbertigibbet moment" in kept_text(with_new, TEXT)
    labels = with_new.classify([TEXT])[0]
    assert labels.counts["backtracking"] == 1
    assert labels == CueClassifier(cues=(*CUES, NEW), name="cues_v1+new", prefilter=False).classify([TEXT])[0]


def test_a_cue_without_a_literal_word_is_refused(v1):
    with pytest.raises(ValueError, match="literal word"):
        Prefilter([Cue("verification", "NUM *")], v1.prefilter.context)


def test_regions_skip_lines_without_cues_and_keep_offsets(v1):
    text = "Plain line one.\nWait, that is wrong.\nPlain line three.\nAnother plain line."
    kept = kept_text(v1, text)
    assert "Wait, that is wrong." in kept and "Plain line one" not in kept and "Another" not in kept
    labels = v1.classify([text])[0]
    assert [text[e.start : e.end] for e in labels.evidence] == ["Wait"]


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("Let me check it.", True),
        ("Check what me and Let said.", False),  # every word of "let me check", not as one token sequence
        ("Nothing here; let mecheck.", False),  # "mecheck" is one token
        ("That cannot be right.", True),  # the tokenizer's exception: "can" + "not"
        ("Wait, that is wrong.", True),
        ("We wait for the bus.", False),  # `wait` must open its sentence
        ("The end. Hmm, wait, no.", True),  # ... which it may after a sentence-final character and openers
        ("To find x, we need y.", True),
        ("To find x we use the formula.", False),  # `then` asks for ", we need" after the match
    ],
)
def test_lines_kept_by_each_cue_condition(v1, line, kept):
    """A line is kept exactly where a cue's match may count; the labels agree with the whole text's either way."""
    text = f"Plain opening line.\n{line}\nPlain closing line."
    assert (line in kept_text(v1, text)) is kept
    assert v1.classify([text]) == CueClassifier(cues=CUES, name="cues_v1", prefilter=False).classify([text])


def test_a_match_in_a_margin_counts_only_where_the_whole_text_counts_it(v1):
    """A kept line's margin may cut the line before it: a cue that opens a piece there ("Wait" after "we") must not
    count as opening a sentence, since in the whole text it does not."""
    v3 = get_classifier("cues_v3")
    cues = tuple(v3.cues.values())
    filtered = type(v3)(cues=cues, name="cues_v3", prefilter=True)
    verdict = "61. almost."  # cues_v3 reads 160 characters before "almost" (`earlier`): the margin
    for pad in range(40):
        head = "x " * pad + "we Wait, the bus came " + "y " * 70
        text = head + "\n" + verdict
        regions = filtered.prefilter.select(text).regions
        if text[regions[0][0] :].startswith("Wait"):
            break
    else:
        pytest.fail("no padding puts a margin's start on 'Wait'")
    labels = filtered.classify([text])[0]
    assert labels == type(v3)(cues=cues, name="cues_v3", prefilter=False).classify([text])[0]
    assert not any(text[e.start : e.end] == "Wait" for e in labels.evidence)


@pytest.mark.parametrize(
    ("rule", "ends_with"),
    [
        (r"\d\s*:\s*", "[:]"),
        (r"=\s*\d+(\.\d+)?\s*[,!]?\s*", r"[!,\d]"),
        (r"(?P<part>\d+)\s*[-+]\s*(and\s+)?(?P=part)\s*", r"[\d]"),  # a backreference ends as its group does
        (r"\b(it|we)\s*", "[et]"),
        (r"^[\W]*", None),  # may match nothing but spaces
        (r"\bfor\s+[^.;:?!,]{1,60}?", None),  # a negated class may end with anything
    ],
)
def test_the_character_a_rule_must_end_with(rule, ends_with):
    derived = last_visible_class(rule)
    assert (derived.pattern if derived else None) == ends_with


def test_a_rule_holds_only_where_its_last_character_may_stand(sample_texts):
    """last_visible_class is a necessary condition: wherever a `before` or `earlier` rule of a cues_vN holds on real
    text, the last non-whitespace character before that place is in the rule's class."""
    rules = {
        rule
        for version in VERSIONS
        for cue in get_classifier(version).cues.values()
        for rule in (cue.before, cue.earlier)
        if rule and "(?<" not in rule
    }
    # Windows before the places the Countdown and verdict cues look at, where these rules do hold.
    places = re.compile(r"=|\bno\b|\bis\b|\bnot\b|\bto\b|\?")
    windows = [text[max(0, m.start() - 160) : m.start()] for text in sample_texts for m in places.finditer(text)]
    windows = sorted(set(windows))[::16]  # a spread of them: all would take half a minute
    held = 0
    for rule in rules:
        derived = last_visible_class(rule)
        if derived is None:
            continue
        compiled = re.compile(f"(?:{rule})\\s*\\Z", re.IGNORECASE)
        for window in windows:
            if compiled.search(window):
                held += 1
                visible = window.rstrip()
                assert visible and derived.match(visible[-1]), (rule, window[-60:])
    assert held > 1000, held
