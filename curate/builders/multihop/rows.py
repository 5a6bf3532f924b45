"""A chain's rows in the three ablation sets (full, half, single): the composed question with X1.. standing for
earlier answers, each hop as stored, and the re-execution of a row from its stored hops alone (ChainMismatch when
anything disagrees)."""

from __future__ import annotations

import math

import pyarrow as pa

from curate.builders.arith import format_number, parse_number
from curate.builders.base import Builder, Decision, Keep
from curate.builders.multihop.chains import Hop
from curate.builders.multihop.sources import SourceProblem

DATA_SOURCE = "curate/multihop"
ABILITY = "math"
SETS = ("full", "half", "single")


HOP_TYPE = pa.struct([
    ("source_id", pa.string()),
    ("question", pa.string()),
    ("answer", pa.string()),
    ("replaced", pa.string()),
    ("substituted_value", pa.string()),
])
SCHEMA = pa.schema([
    ("id", pa.string()),
    ("chain_id", pa.string()),
    ("question", pa.string()),
    ("answer", pa.string()),
    ("data_source", pa.string()),
    ("ability", pa.string()),
    ("n_hops", pa.int32()),
    ("hops", pa.list_(HOP_TYPE)),
])


def hop_text(hop: Hop, position: int) -> str:
    """The hop's problem text: the replaced number becomes X<position> (the previous hop's answer),
    or, at the start of a segment, that answer written as a number."""
    if hop.given is None:
        return hop.problem.question
    given = hop.problem.solution.givens[hop.given]
    stand_in = format_number(hop.value) if position == 0 else f"X{position}"
    return hop.problem.question[:given.start] + stand_in + hop.problem.question[given.end:]


def compose(texts: list[str]) -> str:
    if len(texts) == 1:
        return texts[0]
    k = len(texts)
    parts = [f"Solve these {k} problems in order. Each one uses the answer to the one before it."]
    for position, text in enumerate(texts, start=1):
        parts.append(f"Problem {position}: {text.strip()}")
        if position < k:
            parts[-1] += f"\nLet X{position} be the answer to Problem {position}."
    parts.append(f"What is the answer to Problem {k}?")
    return "\n\n".join(parts)


def render(row_id: str, chain_id: str, hops: list[Hop]) -> dict:
    texts = [hop_text(hop, position) for position, hop in enumerate(hops)]
    return {
        "id": row_id,
        "chain_id": chain_id,
        "question": compose(texts),
        "answer": format_number(hops[-1].answer),
        "data_source": DATA_SOURCE,
        "ability": ABILITY,
        "n_hops": len(hops),
        "hops": [
            {
                "source_id": hop.problem.id,
                "question": text,
                "answer": format_number(hop.answer),
                "replaced": None if hop.given is None else hop.problem.solution.givens[hop.given].text,
                "substituted_value": None if hop.value is None else format_number(hop.value),
            }
            for hop, text in zip(hops, texts)
        ],
    }


def ablation_rows(chain_id: str, chain: list[Hop]) -> dict[str, list[dict]]:
    cut = math.ceil(len(chain) / 2)
    return {
        "full": [render(chain_id, chain_id, chain)],
        "half": [render(f"{chain_id}-h{i}", chain_id, segment) for i, segment in enumerate((chain[:cut], chain[cut:]))],
        "single": [
            render(f"{chain_id}-s{i}", chain_id, [Hop(hop.problem, None, None, hop.problem.solution.answer)])
            for i, hop in enumerate(chain)
        ],
    }


class ChainMismatch(AssertionError):
    """A stored chain that does not re-execute to its stored answers."""


def reexecute(row: dict, sources: dict[str, SourceProblem]) -> str:
    """Recompute a row's answer from its stored hops alone (source problem, replaced text, substituted
    value), checking each hop's stored answer and that each hop takes the previous hop's answer.
    Returns the recomputed final answer; raises ChainMismatch where anything disagrees."""
    previous: str | None = None
    for position, hop in enumerate(row["hops"]):
        problem = sources[hop["source_id"]]
        if hop["replaced"] is None:
            values = problem.solution.values
        else:
            matches = [i for i, g in enumerate(problem.solution.givens) if g.text == hop["replaced"]]
            if len(matches) != 1:
                raise ChainMismatch(f"{row['id']} hop {position}: {hop['replaced']!r} is not written once in the "
                                    "source")
            if position > 0 and hop["substituted_value"] != previous:
                raise ChainMismatch(f"{row['id']} hop {position}: takes {hop['substituted_value']}, previous "
                                    f"answer {previous}")
            values = problem.solution.execute({matches[0]: parse_number(hop["substituted_value"])})
        answer = format_number(values[problem.solution.answer_step])
        if answer != hop["answer"]:
            raise ChainMismatch(f"{row['id']} hop {position}: re-executes to {answer}, stored {hop['answer']}")
        previous = answer
    if previous != row["answer"]:
        raise ChainMismatch(f"{row['id']}: last hop gives {previous}, row answer {row['answer']}")
    return previous


class ChainRows(Builder):
    """Turns each (index, chain) into its rows of the three sets, every row re-executed from its stored hops first:
    a chain that does not reproduce would be a wrong reward (ChainMismatch)."""

    def __init__(self, sources: dict[str, SourceProblem], prefix: str):
        self.sources, self.prefix = sources, prefix

    def decide(self, item: tuple[int, list[Hop]]) -> Decision:
        index, chain = item
        rows = ablation_rows(f"{self.prefix}{index:06d}", chain)
        for row in (row for name in SETS for row in rows[name]):
            reexecute(row, self.sources)
        return Keep(tuple((name, row) for name in SETS for row in rows[name]))
