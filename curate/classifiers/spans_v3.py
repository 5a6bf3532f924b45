"""`spans_v3`: spans_v2's decision over heads trained with genre-balanced weights.

The three sets of heads and the decision are spans_v2's (`SpanDocumentClassifier`): unit heads with balanced classes,
evidence heads without, and a document head; a behavior is present when the mean of the document head's probability
and the best unit's reaches 0.5, and its instances are the runs of adjacent units the evidence heads score at 0.5 or
more. What changes is how the heads were fitted (bench/train_spans.py --write spans_v3): every training text's weight
is scaled so that each genre (forum answers, long model traces, MCQA rationales, short model steps, worked solutions,
Countdown traces) carries the same total weight in every head, so that the largest genres (Countdown traces, long
model traces) no longer set the n-gram weights alone. Leaving one group out, this is ahead of spans_v2 on the real
genres and, narrowly, on the Countdown styles (docs/spans.md).
"""

from __future__ import annotations

from curate.classifiers.base import register
from curate.classifiers.spans_v2 import SpanDocumentClassifier


@register("spans_v3")
def make_genre_balanced_span_classifier(batch_size: int = 64) -> SpanDocumentClassifier:
    return SpanDocumentClassifier("spans_v3", batch_size)
