"""Multi-hop builder: chain GSM8K-style problems so that hop k's answer feeds hop k+1.

Each source problem's solution is parsed into an executable expression graph (`arith`); problems
whose graph does not reproduce their `#### N` answer are set aside with the reason. A link puts the
previous hop's answer in place of one number of the next problem (written once in its text, feeding
its answer), re-executes the next problem's graph with that value, and is accepted only when the value
flows through annotated arithmetic alone (neither it nor anything computed from it is used in arithmetic
the solver wrote in plain text, "9000(.30)=2700", nor stands for another quantity of the same value),
when the answer changes with it (re-executed with a second value), and when every intermediate value
keeps its sign, stays whole where it was whole, and stays within `max_ratio` of its original magnitude.
Every rejected link is written with its reason.

Three ablation sets come from the same chains, hence the same source problems:
    full    one row per chain of k hops
    half    each chain cut into a first segment of ceil(k/2) hops and a second of the rest; the second
            starts from its first hop with the chained value written in as a number, so both
            segments keep exactly the full chain's answers
    single  the k source problems of each chain, unchanged, with their original answers

Output layout:
    OUT/data/{full,half,single}-00000.parquet   RL-ready rows (id, question, answer, data_source, ability, hops, ...)
    OUT/README.md                               card: hop-count distribution, acceptance rate, rejection reasons
    OUT/rejects/sources.jsonl                   problems that could not be used, with the reason
    OUT/rejects/links.jsonl                     every rejected link, with the reason
    OUT/rejects/chains.jsonl                    chain attempts abandoned for want of a valid link
    OUT/.curate/parameters.json, stats.json     bookkeeping
"""

from __future__ import annotations

import bisect
import json
import math
import random
import re
import shutil
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import pyarrow as pa

from curate.builders.arith import (
    ExpressionError,
    Solution,
    UnexecutableSolution,
    format_number,
    parse_number,
    parse_solution,
    written_in_words,
)
from curate.builders.base import Builder, BuildOutput, Decision, Keep, Reject
from curate.builders.jobs import MultihopJob
from curate.console import ProgressBar
from curate.data_cards.cards import (
    load_snippet,
    render_card,
    reproduce_command,
    save_card,
    size_category,
    split_configs,
)
from curate.errors import InputError, OptionError
from curate.files import atomic_open, write_text_atomic
from curate.pipelines.decontam import decontam_card_section, decontaminate
from curate.pipelines.dedup import dedup as run_dedup
from curate.pipelines.dedup import dedup_card_section
from curate.pipelines.readers import REJECT_REASON, InputSpec, is_reject, make_reader
from curate.pipelines.state import STATE, write_once
from curate.pipelines.tag import file_fingerprints

DATA_SOURCE = "curate/multihop"
ABILITY = "math"
SETS = ("full", "half", "single")
MAX_HOPS = 8
REFERENCE = re.compile(r"\bX\d+\b")
POOL = "pool"  # the kept source problems, held in memory for chaining

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


@dataclass
class SourceProblem:
    id: str
    question: str
    answer: str
    solution: Solution
    slots: list[int]  # givens that may take a previous answer


@dataclass
class Hop:
    problem: SourceProblem
    given: int | None  # index of the replaced given; None for a chain's first hop
    value: Fraction | None  # the previous hop's answer put in its place
    answer: Fraction


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


@dataclass
class MultihopResult:
    output: Path
    stats: MultihopStats
    parameters: dict


def parse_hop_range(text: str) -> tuple[int, int]:
    """'3' -> (3, 3); '2-4' -> (2, 4). Chains need at least 2 hops."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        raise OptionError(f"--hops {text!r}: expected a number of hops or a range such as 2-4")
    low = int(match.group(1))
    high = int(match.group(2) or low)
    if not 2 <= low <= high <= MAX_HOPS:
        raise OptionError(f"--hops {text!r}: need 2 <= low <= high <= {MAX_HOPS}")
    return low, high


class SourceFilter(Builder):
    """Keeps the problems whose solution re-executes to their answer; rejects the rest, and the ids in EXCLUDED
    (id -> (reason, detail)), with the reason."""

    def __init__(self, answer_key: str = "answer", excluded: dict[str, tuple[str, str]] | None = None):
        self.answer_key = answer_key
        self.excluded = excluded or {}

    def decide(self, document) -> Decision:
        if is_reject(document):
            reason = document.metadata[REJECT_REASON]
            return _source_reject(reason.split(":")[0], reason, document)
        solution_text = document.metadata.get(self.answer_key)
        if not isinstance(solution_text, str) or not solution_text.strip():
            return _source_reject("missing_solution", f"no text field {self.answer_key!r} with the worked solution",
                                  document)
        if document.id in self.excluded:
            return _source_reject(*self.excluded[document.id], document)
        if REFERENCE.search(document.text):
            return _source_reject("uses_reference_names", "the text already contains a name such as X1", document)
        try:
            solution = parse_solution(document.text, solution_text)
        except UnexecutableSolution as error:
            return _source_reject(error.reason, error.detail, document)
        answer = format_number(solution.answer)
        return Keep.row(SourceProblem(document.id, document.text, answer, solution, solution.substitutable_givens()),
                        split=POOL)


def _source_reject(reason: str, detail: str, document) -> Reject:
    return Reject(reason, {"reason": reason, "detail": detail, "id": document.id, "question": document.text})


def load_sources(
    spec: InputSpec, answer_key: str = "answer", progress: bool = True, rejects: list[dict] | None = None,
    excluded: dict[str, tuple[str, str]] | None = None, out: BuildOutput | None = None,
) -> tuple[list[SourceProblem], MultihopStats]:
    """Read problems and keep those whose solution re-executes to its answer. Everything else is rejected with its
    reason (SourceFilter): into OUT's rejects file when given, else appended to `rejects`. The pool stays in memory:
    chaining draws from all of it at random, and a parsed problem is a few hundred bytes."""
    with BuildOutput() if out is None else nullcontext(out) as sink:
        SourceFilter(answer_key, excluded).run(make_reader(spec, progress=progress).run(), sink)
    if rejects is not None:
        rejects.extend(sink.held_rejects)
    problems = sink.held[POOL]
    stats = MultihopStats(sources_read=sink.decided, sources_executable=sink.kept,
                          sources_with_slots=sum(bool(p.slots) for p in problems), source_rejects=sink.by_reason)
    return problems, stats


def check_link(problem: SourceProblem, given: int, value: Fraction, max_ratio: float) -> tuple[str | None, Fraction | None]:
    """Put `value` in place of given `given` and re-execute. Returns (reason, None) when the link is
    invalid, else (None, the new answer)."""
    solution = problem.solution
    original = solution.givens[given].value
    if value <= 0:
        return "substitute_not_positive", None
    if original.denominator == 1 and value.denominator != 1:
        return "substitute_not_whole", None
    if not 1 / max_ratio <= value / original <= max_ratio:
        return "substitute_out_of_range", None
    fed = solution.steps_fed_by(given)
    # The values the substitution changes: a copy of one of them used outside the annotations (plain-text
    # arithmetic, "half of it") or standing for another quantity would keep its old value there.
    changed = {original} | {solution.values[i] for i in fed}
    if changed & solution.plain.operands:
        return "value_in_unannotated_arithmetic", None
    if any(lit.kind == "const" and lit.value in solution.plain.results for i in fed for lit in solution.steps[i].literals):
        return "unannotated_result_in_annotation", None
    try:
        values = solution.execute({given: value})
        # A link is only a link if the answer moves with the value put in.
        other = solution.execute({given: value + 1})
    except ExpressionError:
        return "division_by_zero", None
    if other[solution.answer_step] == values[solution.answer_step]:
        return "answer_ignores_substitute", None
    # Literals are linked to their source by value: a changed intermediate equal to another given or to another
    # result could be either one where it is used next.
    others = {g.value for i, g in enumerate(solution.givens) if i != given}
    unchanged_steps = {v for i, v in enumerate(solution.values) if i not in fed}
    fed_values = [solution.values[i] for i in fed]
    if set(fed_values) & (others | unchanged_steps) or len(set(fed_values)) < len(fed_values):
        return "changed_value_has_another_meaning", None
    if written_in_words(original, problem.question):
        return "replaced_value_also_in_words", None
    for old, new in zip(solution.values, values):
        if (old > 0) != (new > 0) or (old < 0) != (new < 0):
            return "intermediate_sign_changed", None
        if old.denominator == 1 and new.denominator != 1:
            return "intermediate_not_whole", None
        if old != 0 and not 1 / max_ratio <= abs(new / old) <= max_ratio:
            return "intermediate_out_of_range", None
    answer = values[solution.answer_step]
    if format_number(answer) is None:
        return "answer_not_terminating_decimal", None
    return None, answer


class ChainBuilder:
    """Draws chains at random; a link's candidates are the givens within `max_ratio` of the previous
    answer (found by bisection over all givens sorted by value), tried in random order."""

    def __init__(self, problems: list[SourceProblem], seed: int = 0, max_ratio: float = 10.0, tries_per_link: int = 64):
        if max_ratio <= 1:
            raise OptionError("max_ratio must be greater than 1")
        self.problems = problems
        self.rng = random.Random(seed)
        self.max_ratio = max_ratio
        self.tries_per_link = tries_per_link
        slots = sorted(
            (float(p.solution.givens[g].value), i, g) for i, p in enumerate(problems) for g in p.slots
        )
        self.slot_values = [value for value, _, _ in slots]
        self.slot_refs = [(i, g) for _, i, g in slots]
        starts = [i for i, p in enumerate(problems) if p.solution.answer > 0]
        self.rng.shuffle(starts)
        self.starts = starts
        self.next_start = 0

    def _first_hop(self) -> Hop:
        # Cycle through a shuffled order so that first hops spread over the whole pool.
        problem = self.problems[self.starts[self.next_start % len(self.starts)]]
        self.next_start += 1
        return Hop(problem, None, None, problem.solution.answer)

    def _link(self, previous: Hop, used: set[str], attempt: int, stats: MultihopStats, link_rejects) -> Hop | str:
        value = previous.answer
        low = bisect.bisect_left(self.slot_values, float(value) / self.max_ratio)
        high = bisect.bisect_right(self.slot_values, float(value) * self.max_ratio)
        if low >= high:
            return "no_given_in_range"
        proposals = 0
        for _ in range(self.tries_per_link * 4):
            if proposals >= self.tries_per_link:
                break
            problem_index, given = self.slot_refs[self.rng.randrange(low, high)]
            problem = self.problems[problem_index]
            if problem.id in used:
                continue
            proposals += 1
            stats.link_proposals += 1
            reason, answer = check_link(problem, given, value, self.max_ratio)
            if reason is None:
                stats.links_accepted += 1
                return Hop(problem, given, value, answer)
            stats.link_rejects[reason] += 1
            link_rejects.write(json.dumps({
                "reason": reason, "chain_attempt": attempt, "from_source_id": previous.problem.id,
                "to_source_id": problem.id, "replaced": problem.solution.givens[given].text,
                "substituted_value": format_number(value),
            }) + "\n")
        return "no_valid_link" if proposals else "only_used_sources_in_range"

    def build(self, n: int, hops: tuple[int, int], stats: MultihopStats, link_rejects, chain_rejects,
              progress: bool = True, max_attempts: int | None = None) -> list[list[Hop]]:
        if not self.starts:
            raise InputError("no usable source problem with a positive answer")
        if not self.slot_values:
            raise InputError("no source problem has a number that a previous answer could replace")
        max_attempts = max_attempts or 10 * n + 100
        chains: list[list[Hop]] = []
        with ProgressBar("chains", total=n, enabled=progress, unit="chain") as bar:
            while len(chains) < n and stats.chain_attempts < max_attempts:
                attempt = stats.chain_attempts
                stats.chain_attempts += 1
                k = self.rng.randint(*hops)
                chain = [self._first_hop()]
                used = {chain[0].problem.id}
                while len(chain) < k:
                    hop = self._link(chain[-1], used, attempt, stats, link_rejects)
                    if isinstance(hop, str):
                        stats.chain_rejects[hop] += 1
                        chain_rejects.write(json.dumps({
                            "reason": hop, "chain_attempt": attempt, "n_hops_wanted": k,
                            "source_ids": [h.problem.id for h in chain],
                            "last_answer": format_number(chain[-1].answer),
                        }) + "\n")
                        break
                    chain.append(hop)
                    used.add(hop.problem.id)
                else:
                    chains.append(chain)
                    stats.hop_counts[k] += 1
                    bar.advance()
        return chains


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
                raise ChainMismatch(f"{row['id']} hop {position}: {hop['replaced']!r} is not written once in the source")
            if position > 0 and hop["substituted_value"] != previous:
                raise ChainMismatch(f"{row['id']} hop {position}: takes {hop['substituted_value']}, previous answer {previous}")
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


def run_multihop(
    spec: InputSpec,
    output: str | Path,
    n: int = 5000,
    hops: tuple[int, int] = (2, 4),
    seed: int = 0,
    max_ratio: float = 10.0,
    tries_per_link: int = 64,
    answer_key: str = "answer",
    progress: bool = True,
    license: str = "mit",
    dedup: bool = False,
    decontam: str | None = None,
    benchmarks_dir: str | Path | None = None,
) -> MultihopResult:
    """Builds the chains. `dedup` / `decontam` (benchmarks as `curate decontam --against`) clean the source
    problems before chaining, so that the full, half and single sets stay built from the same problems."""
    if n < 1:
        raise OptionError("n must be at least 1")
    output = Path(output)
    (output / STATE).mkdir(parents=True, exist_ok=True)
    parameters = {
        **spec.fingerprint(), "split": spec.split, "answer_key": answer_key, "n": n, "hops": f"{hops[0]}-{hops[1]}",
        "seed": seed, "max_ratio": max_ratio, "tries_per_link": tries_per_link, "dedup": dedup, "decontam": decontam,
        "benchmarks_dir": str(benchmarks_dir) if benchmarks_dir else None, "license": license,
    }
    excluded, sections = clean_sources(spec, output, answer_key, dedup, decontam, benchmarks_dir, progress)
    with BuildOutput(rejects=output / "rejects" / "sources.jsonl") as sources_out:
        problems, stats = load_sources(spec, answer_key=answer_key, progress=progress, excluded=excluded,
                                       out=sources_out)
    if not problems:
        raise InputError(f"no usable source problem in {spec.path} ({dict(stats.source_rejects)})")

    builder = ChainBuilder(problems, seed=seed, max_ratio=max_ratio, tries_per_link=tries_per_link)
    with atomic_open(output / "rejects" / "links.jsonl") as links, atomic_open(output / "rejects" / "chains.jsonl") as failed:
        chains = builder.build(n, hops, stats, links, failed, progress=progress)

    sources = {p.id: p for p in problems}
    uses: Counter = Counter(hop.problem.id for chain in chains for hop in chain)
    with BuildOutput({name: output / "data" / f"{name}-00000.parquet" for name in SETS}, SCHEMA, row_group=None) as out:
        ChainRows(sources, f"multihop-s{seed}-").run(enumerate(chains), out)
    stats.rows = dict(out.rows)
    stats.distinct_sources = len(uses)
    stats.max_source_uses = max(uses.values(), default=0)

    write_text_atomic(output / STATE / "parameters.json", json.dumps(parameters, indent=2))
    write_text_atomic(output / STATE / "stats.json", json.dumps(stats.to_dict(), indent=2))
    write_card(output, parameters, stats, sections)
    return MultihopResult(output=output, stats=stats, parameters=parameters)


def check_hops(job: MultihopJob) -> tuple[int, int]:
    """The job's hop range; a malformed one fails here, before anything is claimed (the flow checks its parameters
    with it)."""
    return parse_hop_range(job.hops)


def source_spec(job: MultihopJob) -> InputSpec:
    """The source problems of the job, read as a corpus whose text is the question."""
    return InputSpec(path=job.input, text_key=job.question_key, id_key=job.id_key, split=job.split)


def multihop(job: MultihopJob, progress: bool = True, refresh: bool = False) -> MultihopResult | None:
    """Runs `curate multihop` and the multihop flow: claims the output for `job.record()` (a folder holding another
    dataset is refused unless `job.overwrite`), then builds the chains. None when the output is up to date; `refresh`
    builds it all the same (a flow whose cached result is stale)."""
    hops = check_hops(job)
    spec = source_spec(job)
    if not spec.is_hub:
        spec.list_files()  # a local input that names no file fails here, in one line (NoInputFilesError)
    return write_once(job.output, "multihop", job.record(), lambda: run_multihop(
        spec, job.output, n=job.n, hops=hops, seed=job.seed, max_ratio=job.max_ratio,
        tries_per_link=job.tries_per_link, answer_key=job.answer_key, progress=progress, license=job.license,
        **job.cleaning.arguments()), inputs=file_fingerprints(spec), overwrite=job.overwrite, refresh=refresh)


SOURCES_NOTE = ("Applied to the source problems before chaining (a removed problem is in `rejects/sources.jsonl` "
                "with reason `{reason}`, details below), so the full, half and single sets stay built from the same problems.")


def clean_sources(
    spec: InputSpec, output: Path, answer_key: str, dedup: bool, decontam: str | None,
    benchmarks_dir: str | Path | None, progress: bool,
) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Runs dedup and decontamination on the source problems: the ids to set aside (id -> (reason, detail))
    and the card sections. After chaining it would be too late: single rows repeat the first hop of a half
    row by construction, and a removal from one set would leave the ablation sets unmatched."""
    excluded: dict[str, tuple[str, str]] = {}
    sections: dict[str, str] = {}
    for stale in (STATE + "/dedup.json", STATE + "/decontam.json", "rejects/duplicates.jsonl", "rejects/contaminated.jsonl"):
        (output / stale).unlink(missing_ok=True)
    if not (dedup or decontam):
        return excluded, sections
    if spec.is_hub:
        raise OptionError("--dedup / --decontam read the source problems from local files: save the hub split as "
                         "jsonl or parquet first")
    if dedup:
        stage = output / STATE / "sources_dedup"
        result = run_dedup(spec.path, stage, text_key=spec.text_key, id_key=spec.id_key, progress=progress)
        for record in _jsonl(stage / "rejects" / "duplicates.jsonl"):
            excluded[record["id"]] = ("duplicate_source", f"{record['reason']} of {record['duplicate_of']}")
        sections["dedup"] = _with_note(dedup_card_section(result), "duplicate_source")
        _keep_reports(stage, output, "dedup.json", "duplicates.jsonl")
    if decontam:
        stage = output / STATE / "sources_decontam"
        result = decontaminate(spec.path, stage, decontam, fields=[spec.text_key, answer_key], id_key=spec.id_key,
                               benchmarks_dir=benchmarks_dir, progress=progress)
        for record in _jsonl(stage / "rejects" / "contaminated.jsonl"):
            excluded.setdefault(record["id"], (
                "contaminated_source",
                (f"{record['benchmark']} item {record['benchmark_item']} ({record['benchmark_field']}): "
                 f"{record['field']} matched {record['match']} {record['ngram']!r}"),
            ))
        sections["decontam"] = _with_note(decontam_card_section(result), "contaminated_source")
        _keep_reports(stage, output, "decontam.json", "contaminated.jsonl")
    return excluded, sections


def _jsonl(path: Path):
    if path.exists():
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def _with_note(section: str, reason: str) -> str:
    heading, _, body = section.partition("\n\n")
    return f"{heading}\n\n{SOURCES_NOTE.format(reason=reason)}\n\n{body}"


def _keep_reports(stage: Path, output: Path, report: str, removed: str) -> None:
    """Keeps the cleaning report and the removed rows; drops the stage, a cleaned copy of the input that nothing reads."""
    (stage / STATE / report).replace(output / STATE / report)
    if (stage / "rejects" / removed).exists():
        (output / "rejects").mkdir(parents=True, exist_ok=True)
        (stage / "rejects" / removed).replace(output / "rejects" / removed)
    shutil.rmtree(stage, ignore_errors=True)


def _table(header: tuple[str, str], counts: dict, total: int | None = None) -> str:
    if not counts:
        return "_None._"
    lines = [f"| {header[0]} | {header[1]} |" + (" share |" if total else ""), "|---|---|" + ("---|" if total else "")]
    for key, value in counts.items():
        share = f" {100 * value / total:.1f} % |" if total else ""
        lines.append(f"| {key} | {value:,} |{share}")
    return "\n".join(lines)


def multihop_command(parameters: dict, output: Path) -> str:
    return reproduce_command("multihop", options=[
        ("--input", parameters["input"]), ("--output", output), ("--hops", parameters["hops"]), ("--n", parameters["n"]),
        ("--seed", parameters["seed"]), ("--max-ratio", parameters["max_ratio"]),
        ("--tries-per-link", parameters["tries_per_link"]), ("--question-key", parameters["text_key"]),
        ("--answer-key", parameters["answer_key"]), ("--id-key", parameters["id_key"]),
        ("--license", parameters["license"]),
        ("--split", parameters["split"] if parameters["input"].startswith("hf:") else None),
    ], dedup=parameters["dedup"], decontam=parameters["decontam"], benchmarks_dir=parameters["benchmarks_dir"])


FIELDS = [
    ("`id`", "string", "row id (`-h0`/`-h1`: half segments, `-sN`: single hops)"),
    ("`chain_id`", "string", "the chain the row comes from"),
    ("`question`", "string", "the composed problem text"),
    ("`answer`", "string", "the final answer, as a decimal number"),
    ("`data_source`", "string", f"`{DATA_SOURCE}`: the reward function that grades the final answer"),
    ("`ability`", "string", f"`{ABILITY}`"),
    ("`n_hops`", "int32", "number of problems in the row"),
    ("`hops`", "list of struct", ("per problem: `source_id`, `question` (as shown), `answer`, `replaced` (the original "
                                 "number's text the previous answer took the place of), `substituted_value`")),
]


def write_card(output: Path, parameters: dict, stats: MultihopStats, reports: dict[str, str]) -> None:
    """The family card; `reports` are the cleaning sections of the source problems (--dedup / --decontam)."""
    from huggingface_hub import DatasetCardData


    chains = stats.rows.get("full", 0)
    card_data = DatasetCardData(
        license=parameters["license"],
        language=["en"],
        task_categories=["question-answering", "text-generation"],
        size_categories=[size_category(sum(stats.rows.values()))],
        pretty_name="curate: multi-hop chained math problems",
        tags=["reasoning", "math", "multi-hop", "rl", "curate"],
        configs=split_configs(list(SETS)),
    )
    hop_counts = {f"{k} hops": v for k, v in sorted(stats.hop_counts.items())}
    ratio = parameters["max_ratio"]
    rejected_links = stats.link_proposals - stats.links_accepted
    card = render_card(
        card_data,
        summary=f"{chains:,} chains of {parameters['hops']} problems in which each problem's answer takes the place of "
                "a number in the next, so that only a solver who keeps every intermediate answer right reaches the "
                "final one.",
        method=f"Source problems came from `{parameters['input']}`. Each solution's calculator annotations "
               "(`<<48/2=24>>`) were parsed into an expression graph and re-executed exactly (rational arithmetic, no "
               "`eval`); only problems that reproduce their `#### N` answer were used. A link replaces a number written "
               "once in the next problem's text that feeds its answer, then re-executes that problem; it is accepted "
               "only if the value flows through annotated arithmetic alone (neither it nor a value computed from it "
               "takes part in arithmetic written in plain text, such as `9000(.30)=2700` or \"half of 40\", or equals "
               "another number of the problem), if the answer changes when a second value is put in, and if every "
               "intermediate value keeps its sign, stays whole where it was whole and stays within a "
               f"factor {ratio} of its original value. Every row was re-executed from its stored hops before writing.",
        parameters=[("question key" if k == "text_key" else k.replace("_", " "), v) for k, v in parameters.items()],
        command=multihop_command(parameters, output),
        sections=[
            ("Splits (ablation sets from the same chains)",
             ("| split | rows | what |\n|---|---|---|\n"
             f"| `full` | {stats.rows.get('full', 0):,} | one row per chain of k hops |\n"
             f"| `half` | {stats.rows.get('half', 0):,} | each chain cut in two: ceil(k/2) hops, then the rest starting "
             "with the chained value written as a number |\n"
             f"| `single` | {stats.rows.get('single', 0):,} | the source problems of each chain, unchanged, with their "
             "original answers |\n\n`chain_id` ties the rows of all three splits to their chain.")),
            ("Hop-count distribution (`full`)",
             (f"{_table(('hops', 'chains'), hop_counts, chains)}\n\n{stats.distinct_sources:,} distinct source problems "
             f"are used; the most used one appears in {stats.max_source_uses:,} chains.")),
            ("Links",
             (f"{stats.link_proposals:,} links were proposed (a number in another problem within a factor {ratio} of the "
             f"previous answer) and {stats.links_accepted:,} accepted: an acceptance rate of "
             f"{100 * stats.acceptance_rate:.1f} %. Rejected links, by reason (each one is in `rejects/links.jsonl`):\n\n"
             f"{_table(('reason', 'links'), dict(stats.link_rejects.most_common()), rejected_links)}\n\n"
             f"Chain attempts: {stats.chain_attempts:,}; abandoned for want of a valid link (`rejects/chains.jsonl`):\n\n"
             f"{_table(('reason', 'chains'), dict(stats.chain_rejects.most_common()))}")),
            ("Source problems",
             (f"{stats.sources_read:,} read, {stats.sources_executable:,} executable, {stats.sources_with_slots:,} with "
             "at least one number a previous answer can replace. Set aside (`rejects/sources.jsonl`):\n\n"
             f"{_table(('reason', 'problems'), dict(stats.source_rejects.most_common()))}")),
        ],
        reports=reports,
        fields=FIELDS,
        load=load_snippet(list(SETS)),
        limitations="A literal in a solution is linked to a given number or an earlier result by its value; where the "
                    "same value could be either, the number is never chosen for replacement, but a constant the solver "
                    "brought in (e.g. 2 for \"twice\") that happens to equal a given is treated as that given. The "
                    "replaced number's wording around it is kept, so a unit or a plural may read oddly with the new "
                    "value. Source problems are reused across chains.",
    )
    save_card(card, output)
