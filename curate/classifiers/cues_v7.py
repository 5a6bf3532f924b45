"""`cues_v7`: `cues_v6` plus the Countdown phrasings that blind round 7 (evals/blindset/round7, 180 traces written
after v6 was frozen) showed it misses. Round 7 was read once to report v6 (macro F1 0.71: strong-model traces 0.87,
small-model traces 0.39) and is tuning text since; round 8 (evals/blindset/round8), written before this revision, is
its test set. Real-text cues are v6's, unchanged.

A small model searching during RL writes its reasoning into the arithmetic, with few words around it:

* "20 - 2 = 18 no", "(18 + 4) * 3 = 66 no." and the next attempt on the next line: a result judged against the target
  (verification) and, with a new attempt after it, abandoned (backtracking). v3 read "no" only at a sentence start
  ("61. no."); here it follows the equation in the same sentence.
* "63 = 7 × 9, and 9 = 3 × 3", "hmm 99 = 11 * 9, 9 = 18 / ...", "84 = 12 × 7, but 7 isn't easy from 9 and 4": the
  target taken apart around a value that is not given, which is then built or sought. That is the guide's "derived
  intermediate requirement, then pursued" (backward chaining) and a value to build first (subgoal setting). v3's
  decomposition cue needed the word "target" nearby; the pursuit of the part is what shows it here, so a lone
  "42 = 6 × 7" (a solution recognised) still does not count.
* "can I make 4?", "11 would have to come from 2": a value the writer sets out to build (subgoal setting).
* Checks against the problem's conditions: "only one 5", "no spare 1", "there's no 2", "(41 + 2) × 2 isn't allowed",
  "reuses 17", "2 is used", and a search closed by comparing every result with the target ("None of these give 99",
  "None is 5").

Not added: "which is the target" and "this works" stay verification as round 1's rules say, although round 7's
readers read a bare "which is the target" after the only computation as stating the answer; the two rounds' rules
disagree and the cue keeps round 1's.
"""

from __future__ import annotations

from curate.classifiers.base import register
from curate.classifiers.cues import Cue, shared_classifier
from curate.classifiers.cues_v3 import NEW_ATTEMPT
from curate.classifiers.cues_v4 import CueClassifierV4
from curate.classifiers.cues_v6 import CUES_V6

V, B, S, C = "verification", "backtracking", "subgoal_setting", "backward_chaining"

# The sentence so far ends with an equation's result: "20 - 2 = 18", "(18 + 4) * 3 = 66".
AFTER_A_RESULT = r"=\s*\d+(\.\d+)?\s*[,!]?\s*"
# What may follow a verdict in its sentence: its end, or more of the verdict ("no too high", "no, close").
VERDICT_ENDS = r"\s*([.!,;:)]|$|\n|\s+(too|close|not|wait|hmm|again|way|that|this)\b)"
# A number alone at the start of a clause: the left side of "63 = 7 × 9" (v3's decomposition cue reads the same).
# Words after which a number opens a clause ("so 63 = ...", "hmm 99 = ..."); v8 and v9 read the same.
CLAUSE_WORDS = "so|since|because|and|as|target|goal|then|now|but|well|hmm|ok|okay|try|maybe|need|want"
LONE_NUMBER = rf"(^|[.:;,!]\s|\b({CLAUSE_WORDS})\s)\W*\d+\s*"
# After "63 = 7 ×": its last part, then that part sought or built next ("9, and 9 = 3 × 3", "11, with 11 = 22 / 2",
# "7, but 7 isn't easy from 9 and 4"), or a value required from the other numbers ("17, so I need 5 from 6 and 4").
# The part must be the same number: "14 = 2 * 7 and 100 = 2 * 50" factors two numbers, "25 = 81 + 6², 25 = 81 + 36"
# computes forward, and "and 4 is even" states a property; none pursues a part.
PART_PURSUED = (
    r"\s*(\d+)\s*[,;:]?\s*([—–-]\s*)?(and|with|where|so|but|then|now|since|as)?\s*(the\s+other\s+)?"
    r"(\1\s*(=|from\b|isn['’]t\b|is\s+not\b|would\b|needs?\b|needing\b|has\s+to\b|can\b|could\b|cannot\b|"
    r"can['’]t\b|must\b|no\b)|(i|we)\s+(would\s+|['’]d\s+)?need\s+(a\s+|an\s+)?\d+(\.\d+)?\s+(from|out\s+of)\b)"
)
# A number named as missing or spent, ending its clause: "no 2.", "only one 5,", "there's no 2 left".
NUMBER_ENDS = r"\s*([.!,;:)?]|$|\n|\s+(left|available|here|there|spare|to\s+spare|remaining|either|again|twice)\b)"

DECOMPOSITION = "= NUM ×|*|x|+|-|/|−|÷"

ADDED: tuple[Cue, ...] = (
    # --- a result judged in the same sentence, and abandoned when a new attempt follows ---------------------------
    Cue(V, "no|nope|nah", not_in_request=False, before=AFTER_A_RESULT, then=VERDICT_ENDS),
    Cue(B, "no|nope|nah", not_in_request=False, before=AFTER_A_RESULT, then=VERDICT_ENDS, later=NEW_ATTEMPT),
    # --- the target taken apart around a part that is then pursued ---------------------------------------------------
    Cue(S, DECOMPOSITION, before=LONE_NUMBER, then=PART_PURSUED),
    Cue(C, DECOMPOSITION, before=LONE_NUMBER, then=PART_PURSUED),
    # --- a value set out to be built ------------------------------------------------------------------------------
    Cue(S, "can|could i|we make|get|build|form NUM", not_in_request=False, then=r"\s*(\?|from\b|out\s+of\b|with\b)"),
    Cue(S, "would have|need|needs to come from"),
    Cue(S, "needing to come from"),
    # --- checks against the problem's conditions -------------------------------------------------------------------
    Cue(V, "only one NUM", not_in_request=False, then=NUMBER_ENDS),
    Cue(V, "no spare NUM"),
    Cue(V, "there 's|is no NUM", not_in_request=False, then=NUMBER_ENDS),
    Cue(V, "is n't|not allowed|available", before=r"\d\s*\)?\s*", not_in_request=False),
    Cue(V, "reuses|reusing NUM"),
    Cue(V, "is|was already used", before=r"\d\s*", not_in_request=False),
    Cue(V, "but NUM is|was used", not_in_request=False),
    # --- a search closed by comparing its results with the target ----------------------------------------------------
    Cue(V, "none of these|them|those give|gives|equal|equals|reach|reaches|make|makes|work|works|hit|hits"),
    Cue(V, "none is|equals NUM"),
)

CUES_V7: tuple[Cue, ...] = CUES_V6 + ADDED


@register("cues_v7")
def make_cue_classifier_v7(batch_size: int = 64) -> CueClassifierV4:
    return shared_classifier("cues_v7", CUES_V7, batch_size, CueClassifierV4)

