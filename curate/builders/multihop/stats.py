"""What a multihop build counted: sources read and kept, links proposed and refused by reason, chain attempts,
hop counts, rows per set and source reuse (stats.json and the card)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class MultihopStats:
    sources_read: int = 0
    sources_executable: int = 0
    sources_with_slots: int = 0
    source_rejects: Counter = field(default_factory=Counter)
    link_proposals: int = 0
    links_accepted: int = 0
    link_rejects: Counter = field(default_factory=Counter)
    chain_attempts: int = 0
    chain_rejects: Counter = field(default_factory=Counter)
    hop_counts: Counter = field(default_factory=Counter)
    rows: dict = field(default_factory=dict)
    distinct_sources: int = 0
    max_source_uses: int = 0

    @property
    def acceptance_rate(self) -> float:
        return self.links_accepted / self.link_proposals if self.link_proposals else 0.0

    def to_dict(self) -> dict:
        return {
            "sources_read": self.sources_read,
            "sources_executable": self.sources_executable,
            "sources_with_slots": self.sources_with_slots,
            "source_rejects": dict(self.source_rejects.most_common()),
            "link_proposals": self.link_proposals,
            "links_accepted": self.links_accepted,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "link_rejects": dict(self.link_rejects.most_common()),
            "chain_attempts": self.chain_attempts,
            "chain_rejects": dict(self.chain_rejects.most_common()),
            "hop_counts": {str(k): v for k, v in sorted(self.hop_counts.items())},
            "rows": self.rows,
            "distinct_sources": self.distinct_sources,
            "max_source_uses": self.max_source_uses,
        }
