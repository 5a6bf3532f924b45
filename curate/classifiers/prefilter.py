"""Which cue matches a text can hold, found on the raw text, so that spaCy tokenizes only the lines that hold one.

Most lines of a corpus hold no cue that the engine would count, yet tokenizing them was most of the tagging time. For
each cue the prefilter derives, from the cue alone, conditions that every match the engine counts must meet, checks
them on the raw text and names the places that meet them all; the engine then tokenizes only the lines holding such
a place (with the context its rules read) and counts only matches that start on such a line (`Selection.counts`).

The conditions are necessary, never sufficient; each follows from how spaCy's tokenizer and the engine work:

* **The whole token sequence.** Consecutive tokens of a match are separated by nothing or by one space (spaCy keeps a
  single trailing space on a token; any other whitespace is a token of its own, which no pattern word matches), and a
  token's lower-cased text is one of its word's alternatives (`NUM` and `*` are any non-space run). So the lower-cased
  text holds the pattern as one regular expression: each word's alternatives, `[ ]?` between words.
* **Token edges.** spaCy splits a letter from a letter, or a letter from a following digit, only inside a tokenizer
  exception ("cannot" is "can" + "not"; the pieces are read from the tokenizer's own rules); elsewhere it splits at
  spaces, punctuation, symbols and units after digits. So a word that starts with a letter or digit has no letter
  right before it, and one that ends with one has no letter or digit right after it, unless the word is such a piece.
* **Context the cue requires.** `earlier` reads a fixed stretch before the match: checked exactly. `before` and
  `sentence_start` read the sentence before the match, `then` the sentence after it, `later` the text after the
  sentence: sentence bounds are not known without the tokenizer, so each is checked at every place the sentence could
  start or end (a line start, or the first places after a sentence-final character, up to the first letter or digit)
  and passes if it holds at one. Rules that reject a match (`unless_*`, `not_in_*`) are not checked: skipping them
  keeps more, never less. A rule whose regular expression looks behind itself is not checked either.

The unit handed to spaCy is the line, because a line start is a sentence start that needs no tokenizer to find: the
engine opens a sentence at the first token after every line break (`cues.mark_sentences`), and spaCy tokenizes each
whitespace-delimited run on its own. A region that begins at the start of a run and ends at the end of one therefore
gets the same tokens as the whole text, and a kept line inside it the same sentences, as long as the region also
holds the line break before it (or begins at that line). Around each kept line a region adds the context the rules
read: at least `earlier_chars` before the line where a cue reads `earlier`, and after it three whole runs (the "next
three words" rules) and `later_chars` where a cue reads `later`. Regions that touch are merged, so no kept line is
ever cut by a neighbour's margin. A match that starts in a margin, on a line that was not kept, is one the whole text
would not count either, and the engine skips it: its line may be cut, so its context in the region is not the whole
text's. On a kept line, a match of a cue whose rules read no further than the line's margins gets the same tokens,
sentence and context as in the whole text, hence the same verdict: once a line is kept, only the cues that would widen
its margins are still checked there, and a cue found at no place of the line keeps its matches there uncounted.

Checking the context is most of the prefilter's time, so the checks are ordered by cost: for `before` and `earlier`,
first the one character their match must end with, derived from the rule's parsed form (`last_visible_class`), then
the search; a rule that several cues of one pattern share is checked once per place.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol

from curate.classifiers.cue_patterns import (
    is_optional,
    last_visible_class,
    reads_behind,
    required_slots,
    trie_regex,
    word_alternatives,
)

# No letter right before a word (digits may be: spaCy splits units off a number), no letter or digit right after it.
_NO_LETTER = r"[^\W\d_]"
_NO_LETTER_OR_DIGIT_AFTER = r"(?![^\W_])"
_ALNUM = re.compile(r"[^\W_]")
_ALNUM_RUN = re.compile(r"[^\W_]+")
# A whitespace run holding a line break: the first character after it opens a sentence.
_LINE_BREAK = re.compile(r"\s*\n\s*")
# Three whitespace-delimited runs: at least three tokens, the most any rule reads after a match.
_THREE_RUNS = re.compile(r"\S+(?:\s+\S+){0,2}")
_RUN_REST = re.compile(r"\s*\S*")
_SPACE = re.compile(r"\s")


class CueLike(Protocol):
    """What the prefilter reads of a cue (curate.classifiers.cues.Cue)."""

    pattern: str
    sentence_start: bool
    then: str | None
    before: str | None
    earlier: str | None
    later: str | None


@dataclass(frozen=True)
class Context:
    """What the engine reads around a match, and how spaCy's tokenizer and the engine find tokens and sentences.

    pieces: each tokenizer exception's text -> the texts of its tokens; sentence_end_chars: the characters after which
    the engine opens a sentence; openers, like_num: what may stand before a `sentence_start` cue in its sentence;
    earlier_chars, before_chars, later_chars: how far `earlier`, `before` and `later` read; necessary: for a pattern
    the engine gives a rule of its own, a regular expression every counted match of it meets at its start."""

    pieces: Mapping[str, Sequence[str]]
    sentence_end_chars: Iterable[str]
    openers: Iterable[str]
    like_num: Callable[[str], bool]
    earlier_chars: int
    before_chars: int
    later_chars: int
    necessary: Mapping[str, str]


_NOTHING: tuple[frozenset[str], frozenset[int]] = (frozenset(), frozenset())


def _holds_all(present: set[str], slots: list[frozenset[str]]) -> bool:
    """Whether `present` holds an alternative of every slot (a loop: all() over a generator costs twice as much)."""
    for slot in slots:
        if present.isdisjoint(slot):
            return False
    return True


@dataclass
class _Cue:
    index: int
    regex: str  # compiled when a text first needs it (Prefilter.groups): a short input needs few
    exact_end: bool  # the regex's match ends where the engine's does: every word a required literal
    last_num: bool  # every word a required literal but the last, a NUM or `*`: the engine's match ends in its run
    sentence_start: bool
    then: re.Pattern | None
    before: re.Pattern | None
    earlier: re.Pattern | None
    later: re.Pattern | None
    necessary: re.Pattern | None
    # The class the last non-whitespace character before the match must be in for `before` / `earlier` to hold
    # (last_visible_class), or None.
    before_ends: re.Pattern | None
    earlier_ends: re.Pattern | None
    others: list[frozenset[str]]  # the required words' alternatives but the one the cue is looked up by
    margin_before: int
    margin_after: int
    unchecked: bool = False  # no rule the prefilter checks: every match of the regex may count


@dataclass
class Selection:
    """regions: sorted, disjoint (start, end) ranges of the text to tokenize; lines: (start, end, before, after) of
    each kept line, sorted, with the margins its region holds before and after it (None: the whole text is kept and
    every match counts); margins: each cue's (before, after), what its rules read beyond a match's line."""

    regions: list[tuple[int, int]]
    lines: list[tuple[int, int, int, int]] | None
    margins: Sequence[tuple[int, int]] = ()

    def __post_init__(self):
        self._starts = [line[0] for line in self.lines] if self.lines else []

    def counts(self, cue: int, at: int) -> bool:
        """Whether the engine counts a match of cue `cue` that starts at `at` as the whole text would: it starts on a
        kept line whose region holds all its rules read. Other matches lie in a margin, where their own context may
        be cut, or belong to a cue that the prefilter found no place for on that line."""
        if self.lines is None:
            return True
        i = bisect_right(self._starts, at) - 1
        if i < 0:
            return False
        _, end, before, after = self.lines[i]
        need_before, need_after = self.margins[cue]
        return at < end and need_before <= before and need_after <= after


class Prefilter:
    """The places of a text where the engine may count a match of `cues` (indexed as given), and the regions of the
    text that spaCy must tokenize to count them as it would on the whole text."""

    def __init__(self, cues: Sequence[CueLike], context: Context):
        self.context = context
        # Exception pieces that can have a letter or digit right after them (with the characters that follow them
        # there), and those that can have one right before them.
        letter_after: dict[str, set[str]] = {}
        letter_before: set[str] = set()
        for text, pieces in context.pieces.items():
            at = 0
            for left, right in pairwise(pieces):
                at += len(left)
                if _ALNUM.match(text[at - 1]) and _ALNUM.match(text[at]):
                    letter_after.setdefault(left.lower(), set()).add(text[at].lower())
                    letter_before.add(right.lower())
        self.cues: list[_Cue] = []
        # Cues with one pattern (a verdict that is also a failed attempt) are looked for once: (regex, the required
        # words but the one they are looked up by, the cues).
        self.groups: list[tuple[str, list[frozenset[str]], list[_Cue]]] = []
        self._compiled: dict[int, re.Pattern] = {}
        group_of: dict[str, int] = {}
        by_word: dict[str, list[int]] = {}
        for index, cue in enumerate(cues):
            slots = required_slots(cue.pattern)
            if not slots:
                raise ValueError(f"cue pattern {cue.pattern!r} has no literal word the prefilter can look for")
            compiled = self._compile(index, cue, letter_before, letter_after)
            self.cues.append(compiled)
            if cue.pattern not in group_of:
                group_of[cue.pattern] = len(self.groups)
                self.groups.append((compiled.regex, compiled.others, []))
                for word in slots[0]:
                    by_word.setdefault(word, []).append(group_of[cue.pattern])
            self.groups[group_of[cue.pattern]][2].append(compiled)
        self.by_word = {word: tuple(groups) for word, groups in by_word.items()}
        self.margins = [(cue.margin_before, cue.margin_after) for cue in self.cues]
        # The margins a line kept for every cue gets: no check on it can widen them.
        self.widest = (max(m[0] for m in self.margins), max(m[1] for m in self.margins)) if self.margins else (0, 0)
        # Each group's widest margins: on a line kept with these, none of its cues needs a check.
        self.group_margins = [
            (max(c.margin_before for c in members), max(c.margin_after for c in members)) for _, _, members in self.groups
        ]
        # The order groups are tried on a line: those with a cue that needs no check first, then the rest.
        self.first = [0 if any(c.unchecked for c in members) else 1 for _, _, members in self.groups]
        self.leading = frozenset(self.by_word)
        # Every word of every cue's required words; at every position of a run, the longest of them, and with it the
        # words inside it ("the" in "then", "check" in "rechecked"), so overlapping words are all seen.
        self.words = frozenset(w for c in self.cues for slot in c.others for w in slot) | self.leading
        self.lookup = re.compile(f"(?=({trie_regex(self.words)}))")
        self.inside = {
            w: frozenset(w[i:j] for i in range(len(w)) for j in range(i + 1, len(w) + 1) if w[i:j] in self.words)
            for w in self.words
        }
        self._words_in: dict[str, tuple[frozenset[str], frozenset[int]]] = {}
        def char_class(chars: Iterable[str]) -> re.Pattern:
            return re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + "]")

        # A character class is searched fast only if all its characters lie in the Basic Multilingual Plane; one that
        # also holds characters beyond it is tried character by character, several times slower (most texts are
        # ASCII and need only the ASCII ones).
        end_chars = set(context.sentence_end_chars)
        self.ascii_ends = char_class(c for c in end_chars if c.isascii())
        self.plane_ends = char_class(c for c in end_chars if ord(c) <= 0xFFFF)
        astral = [c for c in end_chars if ord(c) > 0xFFFF]
        self.astral_ends = char_class(astral) if astral else None
        self.openers = frozenset(context.openers)
        # An exception made only of words that may stand before a sentence-opening cue may stand there too.
        self.opening_runs = frozenset(
            run.lower()
            for text, pieces in context.pieces.items()
            if all(self._opens(p) for p in pieces)
            for run in _ALNUM_RUN.findall(text)
        )

    def _compile(self, index: int, cue: CueLike, letter_before: set[str], letter_after: dict[str, set[str]]) -> _Cue:
        words = cue.pattern.split()
        parts: list[str] = []
        leading = True  # still among optional words before the first required one: the separator follows them
        for position, word in enumerate(words):
            optional = is_optional(word)
            core = word[:-1] if optional else word
            if core in ("NUM", "*"):
                body = r"\S+"
            else:
                literals = (self._literal(a, letter_before, letter_after) for a in word_alternatives(word))
                body = "(?:" + "|".join(literals) + ")"
            if position == len(words) - 1 and core in ("NUM", "*"):
                body = f"(?P<last>{body})"
            if leading:
                part = f"(?:{body}[ ]?)?" if optional else body
            else:
                part = f"(?:[ ]?{body})?" if optional else f"[ ]?{body}"
            leading = leading and optional
            parts.append(part)
        literal = [not is_optional(w) and w not in ("NUM", "*") for w in words]
        # Where a word's alternative may be a token cut from a longer alternative's text by an exception (an "a" of
        # "ab" followed by "b..."), the regex's match may end elsewhere than the engine's: then `then` is not checked.
        ambiguous = any(
            a != b and b.startswith(a) and b[len(a)] in letter_after.get(a, ())
            for w in words
            for a in word_alternatives(w)
            for b in word_alternatives(w)
        )
        necessary = self.context.necessary.get(cue.pattern)

        def compiled(pattern: str | None, anchored: bool = False) -> re.Pattern | None:
            if pattern is None or reads_behind(pattern):
                return None
            # The engine's own regular expressions, by the same text and flags: re's cache hands back its objects.
            return re.compile(f"(?:{pattern})\\s*\\Z" if anchored else pattern, re.IGNORECASE)

        return _Cue(
            index=index,
            regex="".join(parts),
            exact_end=all(literal) and not ambiguous,
            last_num=all(literal[:-1]) and words[-1] in ("NUM", "*") and not ambiguous,
            sentence_start=cue.sentence_start,
            then=compiled(cue.then),
            before=compiled(cue.before, anchored=True),
            earlier=compiled(cue.earlier, anchored=True),
            later=compiled(cue.later),
            necessary=re.compile(necessary) if necessary else None,
            before_ends=last_visible_class(cue.before) if cue.before and not reads_behind(cue.before) else None,
            earlier_ends=last_visible_class(cue.earlier) if cue.earlier and not reads_behind(cue.earlier) else None,
            others=[frozenset(slot) for slot in required_slots(cue.pattern)[1:]],
            margin_before=self.context.earlier_chars if cue.earlier else 0,
            margin_after=self.context.later_chars if cue.later else 0,
            unchecked=not (necessary or cue.earlier or cue.sentence_start or cue.before or cue.later)
            and (cue.then is None or reads_behind(cue.then)),
        )

    @staticmethod
    def _literal(alt: str, letter_before: set[str], letter_after: dict[str, set[str]]) -> str:
        escaped = re.escape(alt)
        out = escaped
        if _ALNUM.match(alt[0]) and alt not in letter_before:
            out += f"(?<!{_NO_LETTER}{escaped})"
        if _ALNUM.match(alt[-1]) and alt not in letter_after:
            out += _NO_LETTER_OR_DIGIT_AFTER
        return out

    def _opens(self, token: str) -> bool:
        """A token that may stand before a `sentence_start` cue (cues._starts_sentence): space, punctuation, an
        opener or a number; here any token without letters or digits passes, which keeps more."""
        return not _ALNUM.search(token) or token.lower() in self.openers or self.context.like_num(token)

    def select(self, text: str) -> Selection:
        lowered = text.lower()
        if len(lowered) != len(text):
            # Offsets into the lower-cased text would not be offsets into the text.
            return Selection([(0, len(text))], None)
        starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text) if m.end() < len(text)]
        ends: list[int] | None = None  # the sentence-final characters' places, found once a line needs them
        n = len(text)
        words_in, groups, compiled, first = self._words_in, self.groups, self._compiled, self.first
        widest, group_margins = self.widest, self.group_margins
        kept: list[tuple[int, int, int]] = []
        for line, begin in enumerate(starts):
            end = starts[line + 1] if line + 1 < len(starts) else n
            # A token never spans whitespace, so the words a line holds are those its runs hold; runs repeat a lot
            # across a corpus, and looking each distinct one up once is several times cheaper than scanning lines.
            present: set[str] = set()
            looked_up: set[int] = set()  # the groups of the cues looked up by a word the line holds
            for run in set(lowered[begin:end].split()):
                found = words_in.get(run)
                if found is None:
                    found = self._scan(run)
                if found[0]:
                    present |= found[0]
                    looked_up |= found[1]
            if not looked_up:
                continue
            # Once the line is kept, a cue whose rules read no further than the line's margins needs no check: the
            # engine counts its matches on the line as the whole text does (Selection.counts). Groups with a cue
            # that needs none go first, so that most kept lines are known at their first match.
            before = after = -1
            for group in sorted(looked_up, key=first.__getitem__) if len(looked_up) > 1 else looked_up:
                widest_before, widest_after = group_margins[group]
                if widest_before <= before and widest_after <= after:
                    continue
                pattern, others, members = groups[group]
                if not _holds_all(present, others):
                    continue
                pending = [c for c in members if c.margin_before > before or c.margin_after > after]
                regex = compiled.get(group)
                if regex is None:
                    regex = compiled[group] = re.compile(pattern)
                position = begin
                while pending and (match := regex.search(lowered, position, end)) is not None:
                    position = match.start() + 1
                    if ends is None:
                        ends = self._sentence_end_places(text)
                    known: dict = {}
                    for cue in pending:
                        if cue.unchecked or self._may_count(cue, text, match, begin, end, starts, line, ends, known):
                            before, after = max(before, cue.margin_before), max(after, cue.margin_after)
                    pending = [c for c in pending if c.margin_before > before or c.margin_after > after]
                if before == widest[0] and after == widest[1]:
                    break
            if before >= 0:
                kept.append((line, before, after))
        lines = [(starts[line], starts[line + 1] if line + 1 < len(starts) else n, before, after)
                 for line, before, after in kept]
        return Selection(self._regions(text, starts, kept), lines, self.margins)

    def _sentence_end_places(self, text: str) -> list[int]:
        """The places of the text's sentence-final characters, in order."""
        if text.isascii():
            return [m.start() for m in self.ascii_ends.finditer(text)]
        ends = [m.start() for m in self.plane_ends.finditer(text)]
        if self.astral_ends is not None and max(text) > "\uffff":
            ends = sorted(ends + [m.start() for m in self.astral_ends.finditer(text)])
        return ends

    # Distinct runs remembered at most; the cache is emptied when full, so memory stays flat on any corpus.
    CACHE_RUNS = 200_000

    def _scan(self, run: str) -> tuple[frozenset[str], frozenset[int]]:
        """The words of the cues that `run` holds, as substrings (spaCy's tokens of a run are substrings of it), and
        the groups of the cues looked up by one of them."""
        words = frozenset(o for word in set(self.lookup.findall(run)) if word for o in self.inside[word])
        groups = frozenset(g for word in words & self.leading for g in self.by_word[word])
        if len(self._words_in) >= self.CACHE_RUNS:
            self._words_in.clear()
        # Most runs hold no cue's word: they share one value.
        found = self._words_in[run] = (words, groups) if words else _NOTHING
        return found

    def _may_count(self, cue: _Cue, text: str, match: re.Match, begin: int, end: int, starts: list[int], line: int,
                   ends: list[int], found: dict) -> bool:
        """Whether the engine may count a match of `cue` that starts where `match` does, in the line [begin, end).

        `found` holds what was worked out for this match already: the cues of a group often share a rule (a verdict
        and the failed attempt it also is, a subgoal and the backward chaining it also is), which is checked once."""
        start = match.start()
        if cue.necessary is not None and not cue.necessary.match(text, start):
            return False
        # One character first: most places fail there, before any search.
        if cue.earlier_ends is not None or cue.before_ends is not None:
            last = found.get("last")
            if last is None:
                last = found["last"] = self._last_visible(text, start)
            if cue.earlier_ends is not None and (
                last < max(0, start - self.context.earlier_chars) or not cue.earlier_ends.match(text, last)
            ):
                return False
            if cue.before_ends is not None and (
                last < max(begin, start - self.context.before_chars) or not cue.before_ends.match(text, last)
            ):
                return False
        if cue.earlier is not None:
            key = ("earlier", cue.earlier)
            held = found.get(key)
            if held is None:
                window = text[max(0, start - self.context.earlier_chars) : start]
                held = found[key] = cue.earlier.search(window) is not None
            if not held:
                return False
        if cue.sentence_start or cue.before is not None:
            sentence_starts = found.get("starts")
            if sentence_starts is None:
                sentence_starts = found["starts"] = self._sentence_starts(text, start, begin, ends)
            latest, windows = sentence_starts
            if cue.sentence_start:
                opening = found.get("opening")
                if opening is None:
                    opening = found["opening"] = self._opening(text[latest:start])
                if not opening:
                    return False
            if cue.before is not None:
                key = ("before", cue.before)
                held = found.get(key)
                if held is None:
                    held = found[key] = any(cue.before.search(text[w:start]) for w in windows)
                if not held:
                    return False
        if cue.then is not None or cue.later is not None:
            closes = found.get("closes")
            if closes is None:
                closes = found["closes"] = self._sentence_ends(text, start, end, starts, line, ends)
            if cue.then is not None:
                key = ("then", cue.then)
                held = found.get(key)
                if held is None:
                    held = found[key] = self._then_holds(cue, text, match, end, closes)
                if not held:
                    return False
            if cue.later is not None:
                key = ("later", cue.later)
                held = found.get(key)
                if held is None:
                    reach = self.context.later_chars
                    held = found[key] = any(cue.later.match(text[close : close + reach]) for close in closes)
                if not held:
                    return False
        return True

    @staticmethod
    def _then_holds(cue: _Cue, text: str, match: re.Match, end: int, closes: list[int]) -> bool:
        """Whether `then` may hold after the match, at some place the match may end and its sentence may close (cues of
        one group share a pattern, so where the match may end is the same for all of them)."""
        if cue.exact_end:
            finishes = [match.end()]
        elif cue.last_num:
            # The last token starts where the regex's last word does and ends inside that run.
            first = match.start("last")
            space = _SPACE.search(text, first, end)
            finishes = list(range(first + 1, (space.start() if space else end) + 1))
        else:
            return True
        return any(cue.then.match(text, min(finish, close), close) for close in closes for finish in finishes)

    @staticmethod
    def _last_visible(text: str, start: int) -> int:
        """The place of the last non-whitespace character before `start`, or -1."""
        position = start - 1
        while position >= 0 and text[position].isspace():
            position -= 1
        return position

    def _sentence_starts(self, text: str, start: int, begin: int, ends: list[int]) -> tuple[int, list[int]]:
        """Where the sentence holding a match at `start`, in a line that starts at `begin`, may start: the latest such
        place, and the places the engine's `before` window may start (each place, or `before_chars` back from the
        match where the sentence starts earlier).

        After a sentence-final character the engine opens a sentence at the first token that is not punctuation:
        somewhere up to the first letter or digit. Otherwise the sentence starts at the line's start."""
        i = bisect_left(ends, start) - 1
        if i < 0 or ends[i] < begin:
            latest = begin
        else:
            first = _ALNUM.search(text, ends[i] + 1, start)
            latest = first.start() if first else start
        reach = max(begin, start - self.context.before_chars)
        windows = {reach}
        while i >= 0 and ends[i] >= begin:
            first = _ALNUM.search(text, ends[i] + 1, start)
            last = first.start() if first else start
            if last < reach:
                break
            windows.update(p for p in range(max(ends[i] + 1, reach), last + 1) if not text[p].isspace())
            i -= 1
        return latest, sorted(windows)

    def _opening(self, stretch: str) -> bool:
        """Whether a sentence's text before a cue may hold only what `_starts_sentence` skips: every letter-or-digit
        run an opener or a number, or part of an exception made of them."""
        like_num, openers, runs = self.context.like_num, self.openers, self.opening_runs
        for run in _ALNUM_RUN.findall(stretch):
            lowered = run.lower()
            if lowered not in openers and lowered not in runs and not like_num(run):
                return False
        return True

    @staticmethod
    def _sentence_ends(text: str, start: int, end: int, starts: list[int], line: int, ends: list[int]) -> list[int]:
        """Every place the sentence holding a match at `start`, in a line that ends at `end`, may end (its last token's
        end): before a sentence that may open after a sentence-final character (the last one before the match too,
        where the match starts with punctuation), at the next line's start (the line break is the sentence's last
        token), or at the text's end."""
        closes = set()
        i = max(0, bisect_left(ends, start) - 1)
        while i < len(ends) and ends[i] < end:
            first = _ALNUM.search(text, ends[i] + 1, end)
            last = first.start() if first else end - 1
            for p in range(ends[i] + 1, last + 1):
                if not text[p].isspace():
                    closes.update((p, p - 1))
            i += 1
        if line + 1 < len(starts):
            closes.add(starts[line + 1])
        else:
            closes.update((len(text), len(text) - 1))
        return sorted(c for c in closes if c > start)

    def _regions(self, text: str, starts: list[int], kept: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
        n = len(text)
        regions: list[tuple[int, int]] = []
        for line, before, after in kept:
            begin = self._run_start(text, starts[line] - before) if starts[line] > before else 0
            line_end = starts[line + 1] if line + 1 < len(starts) else n
            end = line_end
            if end < n:
                words = _THREE_RUNS.match(text, end)
                end = max(words.end() if words else end, min(n, line_end + after))
                # End at the end of a run, so that the last token is a whole one.
                if end < n and not (text[end].isspace() and not text[end - 1].isspace()):
                    end = _RUN_REST.match(text, end).end()
            # A margin may reach back over earlier regions: merge all it touches, so no kept line is cut.
            while regions and begin <= regions[-1][1]:
                previous = regions.pop()
                begin, end = min(begin, previous[0]), max(end, previous[1])
            regions.append((begin, end))
        return regions

    @staticmethod
    def _run_start(text: str, position: int) -> int:
        """The start of the whitespace-delimited run at or before `position` (a non-space after a space, or 0)."""
        while position > 0 and not (not text[position].isspace() and text[position - 1].isspace()):
            position -= 1
        return position
