"""Multi-hop builder (`curate multihop`): chain GSM8K-style problems so that hop k's answer feeds hop k+1.

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

    stats     what a build counted (MultihopStats)
    sources   the source problems kept when their solution re-executes to its answer
    chains    links checked and chains drawn (check_link, ChainBuilder), the hop range
    rows      a chain's rows in the three sets, and their re-execution from the stored hops
    cleaning  --dedup / --decontam on the source problems, before chaining
    card      the dataset card
    build     the job: check, claim, clean, read, chain, write, stats, card
"""

from curate.builders.multihop.build import MultihopResult, check_hops, multihop, run_multihop, source_spec
from curate.builders.multihop.chains import ChainBuilder, Hop, check_link, parse_hop_range
from curate.builders.multihop.rows import ChainMismatch, ablation_rows, reexecute
from curate.builders.multihop.sources import SourceProblem, load_sources
from curate.builders.multihop.stats import MultihopStats

__all__ = [
    "ChainBuilder", "ChainMismatch", "Hop", "MultihopResult", "MultihopStats", "SourceProblem", "ablation_rows",
    "check_hops", "check_link", "load_sources", "multihop", "parse_hop_range", "reexecute", "run_multihop",
    "source_spec",
]
