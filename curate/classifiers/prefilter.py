"""Which parts of a text can hold a cue, found in one regex pass, so that spaCy tokenizes only those.

Most lines of a corpus hold no cue, yet tokenizing them was most of the tagging time. Every match of a cue pattern
contains, for each of its required words (not optional, not `NUM` or `*`), a token whose lower-cased text is one of
that word's alternatives; so a line whose lower-cased text contains none of the chosen alternatives as a substring
cannot hold a match of that cue. One word per pattern is chosen (the rarest-looking), all of them go into one regex
built as a trie, and a line is kept when the regex finds something in it. Substrings, not whole words: spaCy's token
boundaries do not always fall on regex word boundaries ("cannot" is "can" + "not"), and a false keep only costs time.

The unit is the line, because a line start is a sentence start that needs no tokenizer to find: the engine opens a
sentence at the first token after every line break (`cues.mark_sentences`), and spaCy tokenizes each whitespace-
delimited run on its own. A region that begins at the start of a run and ends at the end of one therefore gets the
same tokens as the whole text, and a kept line inside it the same sentences, as long as the region also holds the
line break before it (or begins at that line). Around each kept line a region adds the context the rules read: at
least `before` characters before the line, and after it `after` characters and three whole runs (the "next three
words" rules). Regions that touch are merged, so no kept line is ever cut by a neighbour's margin.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# How often a word is guessed to occur, to pick the word a cue is looked up by: common words and short strings are
# in almost every line. Only the choice of that word uses this; which lines are kept does not depend on it.
COMMON = frozenset((
    "a", "an", "the", "i", "we", "you", "he", "she", "it", "they", "me", "us", "my", "our", "your", "its", "this",
    "that", "these", "those", "there", "here", "which", "what", "who", "how", "is", "are", "was", "were", "be",
    "been", "being", "am", "'s", "'re", "'m", "'d", "'ll", "'ve", "n't", "not", "no", "yes", "so", "but", "and",
    "or", "if", "then", "than", "as", "at", "by", "for", "from", "in", "into", "of", "on", "to", "up", "out", "with",
    "do", "does", "did", "done", "have", "has", "had", "can", "could", "will", "would", "should", "must", "may",
    "might", "let", "get", "got", "make", "made", "take", "use", "one", "two", "three", "first", "next", "last",
    "now", "just", "also", "all", "any", "some", "each", "more", "less", "same", "new", "other", "another", "way",
    "step", "part", "again", "back", "over", "under", "off", ",", ".", ":", ";", "!", "?", "-", "–", "—", "(", ")",
    "*", "**", "=", "+", "/", "x",
))


def _alternatives(word: str) -> frozenset[str]:
    """A pattern word's alternatives as lower-cased token texts, with both apostrophes (as the engine matches them)."""
    word = word[:-1] if word.endswith("?") and len(word) > 1 else word
    out = set()
    for alt in word.split("|"):
        alt = alt.lower()
        out.add(alt)
        if "'" in alt:
            out.add(alt.replace("'", "’"))
    return frozenset(out)


def _cost(alternatives: frozenset[str]) -> float:
    return sum(100.0 if a in COMMON else 10.0 if len(a) <= 2 else 1.0 / len(a) for a in alternatives)


def required_slots(pattern: str) -> list[frozenset[str]]:
    """For each word of the pattern that every match holds (not optional, not `NUM` or `*`), its alternatives; a
    word with a one-letter alphanumeric alternative ("i|we", "a|an") is left out: nearly every line holds one, and
    looking for it would cost more than it saves. Sorted rarest first."""
    slots = []
    for word in pattern.split():
        if (word.endswith("?") and len(word) > 1) or word in ("NUM", "*"):
            continue
        alternatives = _alternatives(word)
        if any(len(a) == 1 and a.isalnum() for a in alternatives):
            continue
        slots.append(alternatives)
    return sorted(slots, key=_cost)


def _trie_regex(words: Iterable[str]) -> str:
    """One alternation as a trie of escaped literals: at each position it matches the longest word that starts
    there, trying each first character once."""
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        if "" in node and len(node) == 1:
            return ""
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


# A whitespace run holding a line break: the first character after it opens a sentence.
_LINE_BREAK = re.compile(r"\s*\n\s*")
# Three whitespace-delimited runs: at least three tokens, the most any rule reads after a match.
_THREE_RUNS = re.compile(r"\S+(?:\s+\S+){0,2}")
_RUN_REST = re.compile(r"\s*\S*")


class Prefilter:
    """Finds the regions of a text that spaCy must see for a list of cues, each given as (pattern, before, after):
    the most characters its rules read before a match and after the match's sentence, across sentence ends."""

    def __init__(self, cues: Iterable[tuple[str, int, int]]):
        cues = list(cues)
        # Each cue is looked up by its rarest word; a line holding one of that word's alternatives then needs one
        # alternative of every other required word of the cue. A cue with one required word needs no second look:
        # its margins are folded per word into `alone`.
        self.cues: list[tuple[list[frozenset[str]], int, int]] = []
        self.alone: dict[str, tuple[int, int]] = {}
        self.by_word: dict[str, list[tuple[list[frozenset[str]], int, int]]] = {}
        for pattern, before, after in cues:
            slots = required_slots(pattern)
            if not slots:
                raise ValueError(f"cue pattern {pattern!r} has no literal word the prefilter can look for")
            self.cues.append((slots, before, after))
            for word in slots[0]:
                if len(slots) == 1:
                    b, a = self.alone.get(word, (0, 0))
                    self.alone[word] = (max(b, before), max(a, after))
                else:
                    self.by_word.setdefault(word, []).append((slots[1:], before, after))
        self.words = frozenset(w for slots, _, _ in self.cues for slot in slots for w in slot)
        # A lookahead at every position finds the longest word starting there; the words inside it (a prefix or any
        # other substring) are present too, which is how overlapping words ("the" in "then", "check" in "rechecked")
        # are all seen without one regex per word.
        self.regex = re.compile(f"(?=({_trie_regex(self.words)}))")
        self.inside = {w: frozenset(o for o in self.words if o in w) for w in self.words}
        self.leading = frozenset(self.alone) | frozenset(self.by_word)
        # Per distinct run: the words it holds, and those of them a cue is looked up by.
        self._words_in: dict[str, tuple[frozenset[str], frozenset[str]]] = {}

    # Distinct runs remembered at most; the cache is emptied when full, so memory stays flat on any corpus.
    CACHE_RUNS = 200_000

    def _scan(self, run: str) -> tuple[frozenset[str], frozenset[str]]:
        words = frozenset(o for word in set(self.regex.findall(run)) for o in self.inside[word])
        if len(self._words_in) >= self.CACHE_RUNS:
            self._words_in.clear()
        found = self._words_in[run] = (words, words & self.leading)
        return found

    def kept_lines(self, text: str) -> tuple[list[int], list[tuple[int, int, int]]] | None:
        """The starts of all lines, and (line, before, after) for each line that may hold a match (with the widest
        context its possible cues read); None when lower-casing changes the text's length, so that offsets into
        the lower-cased text would not be offsets into the text."""
        lowered = text.lower()
        if len(lowered) != len(text):
            return None
        starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text) if m.end() < len(text)]
        ends = starts[1:] + [len(text)]
        words_in, alone, by_word = self._words_in, self.alone, self.by_word
        kept = []
        for line, (begin, end) in enumerate(zip(starts, ends)):
            # A token never spans whitespace, so the words a line holds are those its runs hold; runs repeat a lot
            # across a corpus, and looking each distinct one up once is several times cheaper than scanning lines.
            present: set[str] = set()
            leading: set[str] = set()
            for run in set(lowered[begin:end].split()):
                found = words_in.get(run)
                if found is None:
                    found = self._scan(run)
                present |= found[0]
                leading |= found[1]
            if not leading:
                continue
            before = after = -1
            for word in leading:
                margins = alone.get(word)
                if margins is not None:
                    before, after = max(before, margins[0]), max(after, margins[1])
                for others, cue_before, cue_after in by_word.get(word, ()):
                    if (cue_before > before or cue_after > after) and all(
                        not present.isdisjoint(slot) for slot in others
                    ):
                        before, after = max(before, cue_before), max(after, cue_after)
            if before >= 0:
                kept.append((line, before, after))
        return starts, kept

    def regions(self, text: str) -> list[tuple[int, int]]:
        """Sorted, disjoint (start, end) character ranges of `text` that hold every line that may hold a match, with
        its context; tokenizing just these gives the same matches, sentences and context as the whole text."""
        lines = self.kept_lines(text)
        if lines is None:
            return [(0, len(text))]
        starts, kept = lines
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
