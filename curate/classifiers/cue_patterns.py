"""What a cue's pattern and rules say on their own, read without any text: the words every match holds (and which
to look a cue up by), a word's alternatives as token texts, one regular expression for many words, and the character
a `before` / `earlier` rule's match must end with. The prefilter (curate.classifiers.prefilter) builds its checks
from these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from re import _constants as sre  # the parsed form of a rule, to derive the character its match must end with
from re import _parser as sre_parser

# How often a word is guessed to occur, to pick the word a cue is looked up by: common words and short strings are
# in almost every line. Only the choice of that word uses this; which places are kept does not depend on it.
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


@cache  # pure, and called for every word of every cue several times while the prefilter is built
def word_alternatives(word: str) -> tuple[str, ...]:
    """A pattern word's alternatives as lower-cased token texts, with both apostrophes (as the engine matches them),
    longest first so that the regular expression tries a word before its prefixes."""
    word = word[:-1] if word.endswith("?") and len(word) > 1 else word
    out = set()
    for alt in word.split("|"):
        alt = alt.lower()
        out.add(alt)
        if "'" in alt:
            out.add(alt.replace("'", "’"))
    return tuple(sorted(out, key=lambda a: (-len(a), a)))


# The commonest of them, in nearly every sentence.
COMMONEST = frozenset((
    "the", "to", "of", "and", "a", "in", "is", "it", "that", "i", "we", "for", "this", "be", "on", "as", "with",
    "by", "are", "so", "if", "not", "can", "or", "at", "from", "then", "let", "=", ",", ".", "-", "(", ")", "+", "*",
    "/", "x", ":",
))


def _cost(alternatives: Iterable[str]) -> float:
    return sum(
        1000.0 if a in COMMONEST else 100.0 if a in COMMON else 10.0 if len(a) <= 2 else 1.0 / len(a)
        for a in alternatives
    )


def is_optional(word: str) -> bool:
    return word.endswith("?") and len(word) > 1


def required_slots(pattern: str) -> list[tuple[str, ...]]:
    """For each word of the pattern that every match holds (not optional, not `NUM` or `*`), its alternatives,
    rarest first: the first is the word the cue is looked up by."""
    slots = [word_alternatives(w) for w in pattern.split() if not is_optional(w) and w not in ("NUM", "*")]
    # A one-letter word ("i|we", "a|an") is in nearly every line: looked up by it, the cue would be tried everywhere.
    return sorted(slots, key=lambda s: (any(len(a) == 1 and a.isalnum() for a in s), _cost(s)))


def trie_regex(words: Iterable[str]) -> str:
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


def reads_behind(pattern: str | None) -> bool:
    """A rule the prefilter leaves unchecked: one that looks behind the place it is matched at, which the whole text
    and the sentence the engine reads may see differently."""
    return pattern is not None and "(?<" in pattern


# Character classes of the parsed categories a rule's last visible character may be in; any other category (\W, \S)
# may be anything.
_CATEGORY_CLASS = {sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_WORD: r"\w"}
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)


def last_visible_class(pattern: str) -> re.Pattern | None:
    """For a rule the engine reads as `(?:pattern)\\s*\\Z` (`before`, `earlier`): a character class that the last
    non-whitespace character before the place it is read at must be in, or None where none can be derived (the rule
    may match only whitespace, or end with a character the analysis does not bound).

    Checking one character is a necessary condition, and far cheaper than the search, which tries every start in a
    window of 160 characters: most places of a math text (each "=", each "no") fail it at once."""
    parsed = sre_parser.parse(pattern, re.IGNORECASE)
    groups = _groups_of(parsed, {})
    chars, blank = _last_visible(parsed, groups)
    if chars is None or blank:
        return None
    return re.compile("[" + "".join(sorted(chars)) + "]", re.IGNORECASE)


def _groups_of(items, out: dict) -> dict:
    """Each numbered group of a parsed rule -> its parsed body (what a backreference to it matches)."""
    for op, arg in items:
        if op is sre.SUBPATTERN:
            if arg[0] is not None:
                out[arg[0]] = arg[-1]
            _groups_of(arg[-1], out)
        elif op in _REPEATS:
            _groups_of(arg[-1], out)
        elif op is sre.BRANCH:
            for alternative in arg[1]:
                _groups_of(alternative, out)
        elif op is sre.ATOMIC_GROUP:
            _groups_of(arg, out)
    return out


def _last_visible(items, groups: dict) -> tuple[set[str] | None, bool]:
    """For a parsed sequence: the class items its match's last non-whitespace character may be (None: anything), and
    whether its match may hold no such character (then what comes before it decides)."""
    chars: set[str] = set()
    for op, arg in reversed(list(items)):
        found, blank = _last_visible_of(op, arg, groups)
        if found is None:
            return None, True
        chars |= found
        if not blank:
            return chars, False
    return chars, True


def _last_visible_of(op, arg, groups: dict) -> tuple[set[str] | None, bool]:
    if op is sre.LITERAL:
        return (set(), True) if chr(arg).isspace() else ({re.escape(chr(arg))}, False)
    if op is sre.IN:
        chars: set[str] = set()
        blank = False
        for item, value in arg:
            if (item is sre.LITERAL and chr(value).isspace()) or (item is sre.CATEGORY and value is sre.CATEGORY_SPACE):
                blank = True
            elif item is sre.LITERAL:
                chars.add(re.escape(chr(value)))
            elif item is sre.RANGE and not any(chr(c).isspace() for c in range(value[0], value[1] + 1)):
                chars.add(f"{re.escape(chr(value[0]))}-{re.escape(chr(value[1]))}")
            elif item is sre.CATEGORY and value in _CATEGORY_CLASS:
                chars.add(_CATEGORY_CLASS[value])
            else:  # a negated class, a range holding whitespace, \W, \S
                return None, True
        return chars, blank
    if op in _REPEATS:
        low, _, body = arg
        chars, blank = _last_visible(body, groups)
        return chars, blank or low == 0
    if op is sre.SUBPATTERN:
        return _last_visible(arg[-1], groups)
    if op is sre.ATOMIC_GROUP:
        return _last_visible(arg, groups)
    if op is sre.BRANCH:
        chars, blank = set(), False
        for alternative in arg[1]:
            found, may = _last_visible(alternative, groups)
            if found is None:
                return None, True
            chars |= found
            blank = blank or may
        return chars, blank
    if op is sre.GROUPREF and arg in groups:
        return _last_visible(groups[arg], groups)
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):  # zero width: the characters before decide
        return set(), True
    return None, True  # any character (.), a negated literal, a conditional group

