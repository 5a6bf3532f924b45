"""The naive keyword floor: one fixed regular expression per behavior, the words anyone would search for first.

    python bench/cue_accuracy.py --classifier keyword --set blindset --split tune

Written down once and never tuned against any labeled set: it is the floor a cue classifier has to clear by a
clear margin to be worth its rules. A behavior is present when its regex matches anywhere in the text (the count is
the number of matches); there is no context rule and no sentence logic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from curate.classifiers.base import Classifier
from curate.schema import Evidence, Labels

KEYWORDS: dict[str, str] = {
    "verification": r"\b(check|checks|checked|checking|verify|verifies|verified|verifying|confirm|confirms|confirmed)\b",
    "backtracking": r"\b(wait|mistake|wrong|try again|instead|backtrack|backtracking)\b",
    "subgoal_setting": r"\b(first|step \d+|next|then we|subgoal|break (this|it) down)\b",
    "backward_chaining": r"\b(backwards?|suffices?|it is enough to|reduces to|working from the)\b",
}


class KeywordBaseline(Classifier):
    name = "keyword"

    def __init__(self) -> None:
        self.patterns = {b: re.compile(p, re.IGNORECASE) for b, p in KEYWORDS.items()}

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        results = []
        for text in texts:
            counts, evidence = {}, []
            for behavior, pattern in self.patterns.items():
                matches = list(pattern.finditer(text))
                counts[behavior] = len(matches)
                evidence += [Evidence(behavior, m.start(), m.end()) for m in matches[:1]]
            results.append(Labels(counts=counts, evidence=sorted(evidence, key=lambda e: e.start)))
        return results
