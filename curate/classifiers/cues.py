"""The cue engine: explicit phrasing of each behavior, found with spaCy's matchers, and the context rules a cue names.

CPU only, no model download: a blank English tokenizer, a sentencizer that also breaks at
newlines (reasoning traces rarely end their lines with a full stop), and token patterns over
lower-cased text. Context rules cut the usual false positives: a forum user asking *how* to
check something is not checking anything, "wait until" is not a change of mind, a cheque is
not a check.

A count is the number of sentences in which a behavior's cues occur: "Wait, that's not right"
is one instance of backtracking, not two. Evidence is the first cue span in each such sentence.

The cues themselves are data: each released version's whole list, and its line cues, is one file in
curate/classifiers/cue_rules, which names the engine below that runs it (ENGINES). An edit here moves every version that engine runs; the golden labels
(tests/golden) catch it, and a change of behavior is a new engine or a new version, not an edit.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

# isort: off
import curate.classifiers.spacy_loader  # noqa: F401  (before spaCy: it keeps thinc from importing torch)

# isort: on
import spacy
from spacy.attrs import LIKE_NUM, ORTH
from spacy.language import Language
from spacy.matcher import Matcher, PhraseMatcher
from spacy.pipeline import Sentencizer
from spacy.tokens import Doc, Span

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.base import Classifier
from curate.classifiers.prefilter import Context, Prefilter, Selection
from curate.schema import Evidence, Labels

# spaCy refuses documents above nlp.max_length; long ones are cut at newlines into pieces of
# this size, which also keeps memory flat on a 20 MB document.
CHUNK_CHARS = 100_000

# How far `later` looks past a match's sentence.
CONTEXT_CHARS = 300
# How far `earlier` looks back from a match, across sentence ends.
EARLIER_CHARS = 160
# How far `before` and `unless_before` look back from a match inside its sentence.
BEFORE_CHARS = 160

# Words that may precede a sentence-initial cue ("Hmm, wait", "Oh no, wait", "So first, ...").
OPENERS = {
    "hmm", "hm", "hmmm", "oh", "ah", "uh", "um", "ok", "okay", "no", "so", "but", "and", "well", "now",
    "then", "alright", "right", "oops", "yes", "yeah", "*", "-", "**", "#", ">", "(", "\"", "“", "'",
}

# A sentence that asks someone else how to do something is a request, not the behavior itself.
REQUEST_PATTERN = re.compile(
    r"\b(how (do|can|could|would|should|does|might) (i|we|one|you)|how to|is there (a|any) (way|method)|"
    r"can (someone|somebody|anyone|you)|could (someone|somebody|anyone|you)|any (hints?|help|ideas?)|"
    r"what is the (best )?way to|i('m| am) (not sure|unsure|confused)|i don'?t (know|understand|see))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Cue:
    """A pattern in a tiny notation: words separated by spaces; `a|b` alternatives; a trailing `?`
    makes a token optional; `NUM` a number; `*` any one token. Apostrophe forms match both ' and ’.
    `then` is a regular expression the rest of the sentence must start with (for long-range cues such as
    "To find X, we need ..." that token patterns with wide gaps would make slow); `unless_then` one it must not
    start with ("First, recall ..." lays out an exposition, not a plan). `as_question` is the behavior the match
    counts for instead when its sentence is a question ("" for none): "Wait, is that right?" checks a result
    rather than abandoning it. `before` is a regular expression the sentence text before the match must end with
    ("14 is not 24" needs a number before "is not"; patterns cannot start with NUM), `unless_before` one it must not
    end with; `as_check` one that, found anywhere in the sentence, makes the match count as verification ("Maybe
    I miscounted" suspects an error in order to check it; it revises nothing). `earlier` is one the text before the match,
    across sentence ends, must end with ("almost." judges the number just written); `later` one the text after the
    match's sentence must start with (a failed attempt followed by a new one abandons it)."""

    behavior: str
    pattern: str
    sentence_start: bool = False  # the cue must open its sentence (after OPENERS)
    not_in_request: bool = True  # reject inside a sentence that asks others how to do it
    not_in_question: bool = False  # reject in any sentence ending with "?"
    unless_next: frozenset[str] = frozenset()  # reject when one of the next three words is one of these
    then: str | None = None
    unless_then: str | None = None
    as_question: str | None = None
    before: str | None = None
    unless_before: str | None = None
    as_check: str | None = None
    earlier: str | None = None
    later: str | None = None


def _token_spec(word: str) -> dict:
    optional = word.endswith("?") and len(word) > 1
    if optional:
        word = word[:-1]
    if word == "NUM":
        spec: dict = {"LIKE_NUM": True}
    elif word == "*":
        spec = {"IS_SPACE": False}
    else:
        options: list[str] = []
        for alt in word.split("|"):
            options.append(alt)
            if "'" in alt:
                options.append(alt.replace("'", "’"))
        spec = {"LOWER": {"IN": options}} if len(options) > 1 else {"LOWER": options[0]}
    if optional:
        spec["OP"] = "?"
    return spec


V, B, S = "verification", "backtracking", "subgoal_setting"

# The `?` cue counts where "*" or "**" is one of the next two tokens (_accept): in the raw text, a "*" after the "?"
# past at most one whitespace stretch, one run and one space. The prefilter keeps only the "?" that have one.
SUBQUESTION_NEXT = r"\?\s*\S*[ ]?\*"

BACKTRACKING_WAIT_VERIFIES = re.compile(
    r"\b(check|verify|double-check|confirm|make sure|be sure|sanity)\b", re.IGNORECASE
)
WAIT_NOT_REVISION = re.compile(r"^\s*(wait|hold on|hang on)\s+(for|until|till|to|and see)\b", re.IGNORECASE)


def _anchor(words: list[str]) -> list[str]:
    """A pattern's leading words that every match starts with: up to the first number, wildcard or optional word."""
    anchor = []
    for word in words:
        if word.endswith("?") or "NUM" in word.split("|") or word == "*":
            break
        anchor.append(word)
    if not anchor:
        raise ValueError(f"cue pattern {' '.join(words)!r} must start with a literal word")
    return anchor


def spellings(words: list[str]) -> Iterator[tuple[str, ...]]:
    """Every token sequence a pattern of literal words can match (alternatives, optional words, apostrophes)."""
    choices = []
    for word in words:
        optional = word.endswith("?") and len(word) > 1
        alternatives = word[:-1].split("|") if optional else word.split("|")
        alternatives += [a.replace("'", "’") for a in alternatives if "'" in a]
        choices.append(alternatives + ([None] if optional else []))
    for combination in product(*choices):
        phrase = tuple(w for w in combination if w is not None)
        if phrase:
            yield phrase


def _build_nlp() -> Language:
    nlp = spacy.blank("en")
    nlp.max_length = CHUNK_CHARS * 2
    return nlp


SENTENCE_END_CHARS: frozenset[str] = frozenset(Sentencizer.default_punct_chars)


def mark_sentences(doc: Doc) -> Doc:
    """spaCy's Sentencizer rule, plus a sentence at every line break, computed on token arrays.

    The Sentencizer walks the Doc creating a Python Token per token, which cost more than tokenizing;
    its rule is the same: after a sentence-final character, the next token that is neither
    punctuation nor such a character opens a sentence (so closing quotes and brackets stay behind)."""
    n = len(doc)
    if n == 0:
        return doc
    columns = doc.to_array(["ORTH", "IS_PUNCT", "IS_SPACE"])
    orth = columns[:, 0]
    # Binary search in the sorted ids of the sentence-final characters: np.isin sorted every Doc's column (a tenth
    # of the tagging time).
    ids = _end_char_ids(doc.vocab)
    at = np.searchsorted(ids, orth)
    at[at == len(ids)] = 0
    ends = ids[at] == orth
    punct = columns[:, 1].astype(bool) | ends
    # For each token, how many sentence-final characters precede it since the last ordinary token.
    ordinary = np.flatnonzero(~punct)
    ends_before = np.concatenate(([0], np.cumsum(ends)))
    previous_ordinary = np.concatenate(([-1], ordinary[:-1]))
    opens = ends_before[ordinary] - ends_before[previous_ordinary + 1] > 0
    starts = np.full(n, -1, dtype=np.int64)
    starts[ordinary[opens]] = 1
    starts[0] = 1
    # The tokenizer keeps only a single trailing space on a token: every line break sits in a whitespace
    # token, and the next token that is not whitespace opens a sentence. (Doc.text would build every Token.)
    space = columns[:, 2].astype(bool)
    if space.any():
        strings = doc.vocab.strings
        # Whether a whitespace text holds a line break is looked up once per text and process (np.unique and np.isin
        # cost more than the rest of this function on the short pieces the prefilter hands over).
        spaces = np.flatnonzero(space)
        kinds = orth[spaces].tolist()
        if len(_NEWLINE) > 100_000:
            _NEWLINE.clear()
        for kind in set(kinds).difference(_NEWLINE):
            _NEWLINE[kind] = "\n" in strings[kind]
        breaks = spaces[[_NEWLINE[kind] for kind in kinds]]
        if len(breaks):
            words = np.flatnonzero(~space)
            after = np.searchsorted(words, breaks + 1)
            starts[words[after[after < len(words)]]] = 1
    # Setting Token.is_sent_start re-checks the whole Doc each time; write the column in one go.
    doc.from_array(["SENT_START"], starts.astype(np.uint64).reshape(-1, 1))  # spaCy's columns are uint64; -1 wraps
    return doc


_END_CHAR_IDS: dict[int, np.ndarray] = {}
# Whitespace texts, by their ids (string hashes, the same in every vocabulary) -> whether they hold a line break.
_NEWLINE: dict[int, bool] = {}


def _end_char_ids(vocab) -> np.ndarray:
    key = id(vocab)
    if key not in _END_CHAR_IDS:
        _END_CHAR_IDS[key] = np.array(sorted(vocab.strings.add(c) for c in SENTENCE_END_CHARS), dtype=np.uint64)
    return _END_CHAR_IDS[key]


def _chunks(text: str) -> Iterator[tuple[int, str]]:
    """Cut text into pieces of at most CHUNK_CHARS, at the last newline (else space) before the limit."""
    start = 0
    while len(text) - start > CHUNK_CHARS:
        window = text[start : start + CHUNK_CHARS]
        cut = window.rfind("\n")
        if cut < CHUNK_CHARS // 2:
            cut = window.rfind(" ")
        if cut < CHUNK_CHARS // 2:
            cut = CHUNK_CHARS - 1
        yield start, text[start : start + cut + 1]
        start += cut + 1
    if start < len(text):
        yield start, text[start:]


def _starts_sentence(start: int, sent: Span) -> bool:
    for token in sent:
        if token.i >= start:
            return True
        if token.is_space or token.is_punct or token.lower_ in OPENERS or token.like_num:
            continue
        return False
    return True


class CueClassifier(Classifier):
    """The matching engine over one version's cues (its file in cue_rules), named by the version."""

    def __init__(self, cues: Sequence[Cue], name: str, batch_size: int = 64, prefilter: bool = True):
        self.name = name
        self.batch_size = batch_size
        self.nlp = _build_nlp()
        # With `prefilter` (the default), spaCy sees only the lines that hold a place where a cue's match may count
        # (prefilter.py), each with the context its cues read beyond their sentence, and only matches at such places
        # are counted. The labels are the same either way (tests/classifiers/test_prefilter.py). On real text seen
        # once it tokenizes ~30 % of it and classifies 1.4-1.9x faster; on text spaCy's tokenizer has cached (the
        # bench's repeated corpus) about as fast as without (bench/tag_throughput.py).
        self.prefilter = Prefilter(cues, self._prefilter_context()) if prefilter else None
        # Fixed phrases go to the PhraseMatcher (a trie, several times faster than token patterns);
        # only cues with numbers or wildcards need the Matcher.
        # One Matcher per pattern: an anchor says which pattern may start there, and running every pattern on every
        # anchor's window cost most of the matching time once cue lists grew (cues_v3).
        self.matchers: dict[str, tuple[Matcher, int]] = {}
        self.matcher = Matcher(self.nlp.vocab)  # all token patterns together, to inspect a cue list; unused by classify
        self.phrases = PhraseMatcher(self.nlp.vocab, attr="LOWER")
        self._hashes: dict[str, int] = {}  # word -> hash of its lower-cased text, for _lowered
        # The Matcher costs ~1 s/MB per handful of patterns even where nothing matches; it only runs on a
        # window after an anchor (each pattern's leading literal words) that the PhraseMatcher found.
        self.anchors = PhraseMatcher(self.nlp.vocab, attr="LOWER")
        self.fixed_after: dict[str, list[tuple[int, frozenset[int] | None]]] = {}  # see _fixed_after
        self.cues: dict[str, Cue] = {}
        self.index: dict[str, int] = {}  # key -> the cue's place in the list, as the prefilter names cues
        self.then = {
            pattern: re.compile(pattern, re.IGNORECASE)
            for cue in cues
            for pattern in (cue.then, cue.unless_then, cue.as_check, cue.later)
            if pattern
        }
        # `before` patterns are anchored at the end of the text before the match.
        self.before = {
            pattern: re.compile(f"(?:{pattern})\\s*\\Z", re.IGNORECASE)
            for cue in cues
            for pattern in (cue.before, cue.unless_before, cue.earlier)
            if pattern
        }
        for i, cue in enumerate(cues):
            key = f"{cue.behavior}:{i}"
            self.cues[key] = cue
            self.index[key] = i
            words = cue.pattern.split()
            if any(w.removesuffix("?") in ("NUM", "*") for w in words):
                matcher = Matcher(self.nlp.vocab)
                matcher.add(key, [[_token_spec(w) for w in words]])
                self.matchers[key] = (matcher, len(words))
                self.matcher.add(key, [[_token_spec(w) for w in words]])
                anchor = _anchor(words)
                self.anchors.add(key, [self._lowered(p) for p in spellings(anchor)])
                self.fixed_after[key] = self._fixed_after(words[len(anchor) :])
            else:
                self.phrases.add(key, [self._lowered(p) for p in spellings(words)])

    def _prefilter_context(self) -> Context:
        """What the prefilter must know of this engine's tokenizer, sentences and context rules."""
        return Context(
            pieces={text: [piece[ORTH] for piece in pieces] for text, pieces in self.nlp.tokenizer.rules.items()},
            sentence_end_chars=SENTENCE_END_CHARS,
            openers=OPENERS,
            like_num=self.nlp.vocab.lex_attr_getters[LIKE_NUM],
            earlier_chars=EARLIER_CHARS,
            before_chars=BEFORE_CHARS,
            later_chars=CONTEXT_CHARS,
            necessary={"?": SUBQUESTION_NEXT},
        )

    def _fixed_after(self, words: list[str]) -> list[tuple[int, frozenset[int] | None]]:
        """The words after a pattern's anchor that sit at a fixed offset from it in every match (up to the first
        optional word or `*`): (offset, the LOWER hashes its token may have), None for a `NUM` (LIKE_NUM)."""
        fixed = []
        for offset, word in enumerate(words):
            if word == "*" or (word.endswith("?") and len(word) > 1):
                break
            spec = _token_spec(word)
            if "LIKE_NUM" in spec:
                fixed.append((offset, None))
            else:
                lower = spec["LOWER"]
                options = lower["IN"] if isinstance(lower, dict) else [lower]
                fixed.append((offset, frozenset(self.nlp.vocab.strings.add(o) for o in options)))
        return fixed

    def _lowered(self, phrase: tuple[str, ...]) -> tuple[int, ...]:
        """A phrase as the PhraseMatcher stores it with attr LOWER: the hash of each word's lower-cased text (a token's
        LOWER is `text.lower()`). Handing it these instead of a Doc per phrase (cues_v3 has ~17,000 phrases) made
        building the classifier 0.6 s faster."""
        hashes = self._hashes
        for word in phrase:
            if word not in hashes:
                hashes[word] = self.nlp.vocab.strings.add(word.lower())
        return tuple(hashes[word] for word in phrase)

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        # (text, offset of the piece in it, the piece, the prefilter's selection of its chunk or None, the piece's
        # offset in that chunk)
        pieces: list[tuple[int, int, str, Selection | None, int]] = []
        for t, text in enumerate(texts):
            for offset, chunk in _chunks(text):
                if self.prefilter is None:
                    pieces.append((t, offset, chunk, None, 0))
                    continue
                selection = self.prefilter.select(chunk)
                pieces.extend(
                    (t, offset + begin, chunk[begin:end], selection, begin) for begin, end in selection.regions
                )
        hits: list[dict[str, dict[int, tuple[int, int]]]] = [
            {b: {} for b in BEHAVIOR_NAMES} for _ in texts
        ]
        docs = self.nlp.pipe((chunk for _, _, chunk, _, _ in pieces), batch_size=self.batch_size)
        for (t, offset, chunk, selection, base), doc in zip(pieces, docs):
            matches = self._matches(doc)
            if selection is not None and matches:
                # A match the prefilter does not count is one the whole text would not count: it lies in a margin,
                # whose line may be cut here, or its cue has no place on its line.
                index, strings = self.index, self.nlp.vocab.strings
                matches = [m for m in matches if selection.counts(index[strings[m[0]]], base + doc[m[1]].idx)]
            if not matches:
                continue
            # Only a document with a match needs its sentences: most have none, and for a short one marking
            # them costs several times more than tokenizing it.
            mark_sentences(doc)
            # Doc.sents and Span.sent build a Python object per token; the sentence column is enough.
            sentence_starts = np.flatnonzero(doc.to_array("SENT_START") == 1).tolist()
            sentence_starts.append(len(doc))
            # Each sentence with its text, sliced from the chunk once: Span.text builds a Token per token.
            sentences: dict[int, tuple[Span, str]] = {}
            for match_id, start, end in matches:
                key = self.nlp.vocab.strings[match_id]
                cue = self.cues[key]
                index = bisect_right(sentence_starts, start) - 1
                if index not in sentences:
                    span = doc[sentence_starts[index]:sentence_starts[index + 1]]
                    sentences[index] = (span, chunk[span.start_char:span.end_char])
                sent, sentence = sentences[index]
                behavior = self._accept(cue, doc, start, end, sent, sentence, chunk)
                if behavior is None:
                    continue
                sentence_key = offset + sent.start_char
                last = doc[end - 1]
                location = (offset + doc[start].idx, offset + last.idx + len(last))
                current = hits[t][behavior].get(sentence_key)
                if current is None or location < current:
                    hits[t][behavior][sentence_key] = location
        results = []
        for per_behavior in hits:
            counts = {b: len(per_behavior[b]) for b in BEHAVIOR_NAMES}
            evidence = sorted(
                (Evidence(b, s, e) for b in BEHAVIOR_NAMES for (s, e) in per_behavior[b].values()),
                key=lambda ev: (ev.start, ev.behavior),
            )
            results.append(Labels(counts=counts, evidence=evidence))
        return results

    def _matches(self, doc: Doc) -> list[tuple[int, int, int]]:
        found = self.phrases(doc)
        anchored = set(self.anchors(doc))
        if anchored:
            # Every match of a pattern starts with its anchor, so the window after each of its anchors finds them all.
            windows = set()
            strings = self.nlp.vocab.strings
            columns = doc.to_array(["LOWER", "LIKE_NUM"])
            n = len(doc)
            for anchor_id, start, anchor_end in anchored:
                key = strings[anchor_id]
                # The words after the anchor that every match has at fixed places are checked on the token columns
                # first: "= NUM + NUM" is anchored on every "=" of a worked solution, and running the Matcher on
                # each anchor's window was most of the matching time.
                if any(
                    anchor_end + offset >= n
                    or (not columns[anchor_end + offset, 1] if lowers is None else columns[anchor_end + offset, 0] not in lowers)
                    for offset, lowers in self.fixed_after[key]
                ):
                    continue
                matcher, length = self.matchers[key]
                for match_id, begin, end in matcher(doc[start:start + length]):
                    windows.add((match_id, start + begin, start + end))
            found += sorted(windows)
        return found

    def _accept(
        self, cue: Cue, doc: Doc, start: int, end: int, sent: Span, sentence: str, chunk: str = ""
    ) -> str | None:
        """Apply the context rules to the match doc[start:end] in `sent`, whose text is `sentence`; returns the
        behavior it counts for, or None.

        Works on token indices: slicing a Doc into a Span costs time proportional to the whole Doc."""
        following = [doc[i].text for i in range(end, min(end + 3, len(doc)))]
        if cue.pattern == "?":
            # SUBQUESTION_NEXT is what this rule asks of the raw text, for the prefilter.
            return cue.behavior if any(t in ("**", "*") for t in following[:2]) else None
        if cue.sentence_start and not _starts_sentence(start, sent):
            return None
        if cue.not_in_request and REQUEST_PATTERN.search(sentence):
            return None
        if cue.not_in_question and sentence.rstrip().endswith("?"):
            return None
        if cue.unless_next and any(t.lower() in cue.unless_next for t in following):
            return None
        rest = doc[end - 1].idx + len(doc[end - 1]) - sent.start_char
        if cue.then and not self.then[cue.then].match(sentence, rest):
            return None
        if cue.unless_then and self.then[cue.unless_then].match(sentence, rest):
            return None
        if cue.before or cue.unless_before:
            # The last 160 characters are context enough, and keep the search short in a sentence-less trace.
            prefix = sentence[max(0, doc[start].idx - sent.start_char - BEFORE_CHARS) : doc[start].idx - sent.start_char]
            if cue.before and not self.before[cue.before].search(prefix):
                return None
            if cue.unless_before and self.before[cue.unless_before].search(prefix):
                return None
        if cue.earlier and not self.before[cue.earlier].search(
            chunk[max(0, doc[start].idx - EARLIER_CHARS) : doc[start].idx]
        ):
            return None
        if cue.later and not self.then[cue.later].match(chunk[sent.end_char : sent.end_char + CONTEXT_CHARS]):
            return None
        if cue.as_question is not None and sentence.rstrip().endswith("?"):
            return cue.as_question or None
        if cue.behavior == B and doc[start].lower_ in {"wait", "hold", "hang"}:
            tail = sentence[doc[start].idx - sent.start_char :]
            if WAIT_NOT_REVISION.match(tail):
                return None
            if BACKTRACKING_WAIT_VERIFIES.search(tail):
                # "Wait, let me double-check ..." stops to verify rather than to revise.
                return V
        if cue.as_check and self.then[cue.as_check].search(sentence):
            return V
        return cue.behavior


class LineCueClassifier(CueClassifier):
    """The engine's labels plus its version's line cues: (behavior, regular expression) pairs read on the raw text
    with ^ and $ at line ends, for the layout of a line, which token patterns cannot read ("1. **Define
    Variables:**": a numbered bold heading announces one step of a plan). A line cue adds an instance only on a line
    where its behavior has none yet: the engine counts sentences, and a heading line is one sentence at most."""

    def __init__(self, cues: Sequence[Cue], name: str, batch_size: int = 64, prefilter: bool = True,
                 line_cues: Sequence[tuple[str, str]] = ()):
        super().__init__(cues=cues, name=name, batch_size=batch_size, prefilter=prefilter)
        self.line_cues = tuple((behavior, re.compile(pattern, re.MULTILINE)) for behavior, pattern in line_cues)

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        return [self._with_line_cues(text, labels) for text, labels in zip(texts, super().classify(texts))]

    def _with_line_cues(self, text: str, labels: Labels) -> Labels:
        added: list[Evidence] = []
        for behavior, pattern in self.line_cues:
            # The engine's evidence is sorted by start: one bisect per heading finds whether its line has one.
            starts = [e.start for e in labels.evidence if e.behavior == behavior]
            for match in pattern.finditer(text):
                line_start = text.rfind("\n", 0, match.start()) + 1
                line_end = text.find("\n", match.start())
                line_end = len(text) if line_end < 0 else line_end
                i = bisect_left(starts, line_start)
                if i < len(starts) and starts[i] < line_end:
                    continue
                added.append(Evidence(behavior, match.start(), match.end()))
        if not added:
            return labels
        counts = dict(labels.counts)
        for evidence in added:
            counts[evidence.behavior] = (counts[evidence.behavior] or 0) + 1
        evidence = sorted(labels.evidence + added, key=lambda ev: (ev.start, ev.behavior))
        return Labels(counts={b: counts[b] for b in BEHAVIOR_NAMES}, evidence=evidence, error=labels.error)


# The engines a version's file may name: the sentence cues alone (cues_v1 to cues_v3), or with line cues (cues_v4 on).
ENGINES: dict[str, type[CueClassifier]] = {"sentence_cues": CueClassifier, "sentence_and_line_cues": LineCueClassifier}


# One classifier per process, version and batch size. Building one (spaCy pipeline, matchers over every cue
# expansion) takes about 0.25 s; a worker that runs several tasks, or a tag and a build in one
# process, would pay it for each. classify() keeps no state between calls, so sharing is safe.
_BUILT: dict[tuple[str, int], CueClassifier] = {}


def shared_classifier(name: str, cues: Sequence[Cue], batch_size: int, engine: type[CueClassifier],
                      line_cues: Sequence[tuple[str, str]] = ()) -> CueClassifier:
    """The process's one classifier of this version and batch size, built by `engine` (the class its file names),
    with the version's `line_cues` where that engine reads them."""
    key = (name, batch_size)
    if key not in _BUILT:
        extra = {"line_cues": line_cues} if line_cues else {}  # only the line engine's files carry any
        _BUILT[key] = engine(batch_size=batch_size, cues=cues, name=name, **extra)
    return _BUILT[key]
