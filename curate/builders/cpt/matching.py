"""The length-matching program: both sets drawn from their pools at one token budget (within the tolerance) with
length distributions as alike as the pools allow (stratified on token-length bins x domain; the residual KS
statistic reported). `best` places the length mass the two pools do not share with a linear program."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from curate.builders.cpt.common import VARIANTS, CPTError

LENGTH_EDGES = (0, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# best (default): both sets at the full budget, their length profiles as alike as both pools allow (shared length
# quantiles; what the pools do not share comes from the nearest strata); the residual KS is reported. strict: both
# pools first cut to their common length range, both sets filled to the profile both can supply, and the build
# refuses when that range holds too few tokens (`common` before). range: the cut only. none: stratified filling only.
LENGTH_MATCH_MODES = ("best", "strict", "range", "none")
LENGTH_MATCH_ALIASES = {"common": "strict"}


@dataclass
class Candidate:
    id: str
    n_tokens: int
    domain: str | None


@dataclass
class MatchReport:
    budget: int
    tolerance: float
    enriched_tokens: int
    minimized_tokens: int
    enriched_documents: int
    minimized_documents: int
    ks_statistic: float
    length_edges: list[int]
    strata: int
    strata_short: list[str]  # strata the minimized pool could not fill from the same domain
    length_match: str = "none"
    length_range: list[int] | None = None  # common token-length range both pools were cut to
    length_removed: dict[str, int] = field(default_factory=dict)  # candidates each pool lost to that range
    length_weights: list[float] | None = None  # strict: token share of each length bin, both sets
    # best: per-bin token targets of each set, the KS of those targets (what the pools allow at this budget) and
    # the tokens both pools hold in common strata
    length_targets: dict[str, list[int]] | None = None
    target_ks: float | None = None
    shared_tokens: int | None = None
    pool_tokens: dict[str, int] = field(default_factory=dict)  # tokens of each candidate pool the matching saw
    pool_documents: dict[str, int] = field(default_factory=dict)
    pool_used: dict[str, float] = field(default_factory=dict)  # share of each pool's tokens in its set
    # documents per LENGTH_EDGES bucket: {"enriched_pool", "enriched", "minimized_pool", "minimized"}
    length_histogram: dict[str, list[int]] = field(default_factory=dict)


def length_match_mode(value: str) -> str:
    """The mode's name (`common` is the old name of `strict`); a clear error for anything else."""
    mode = LENGTH_MATCH_ALIASES.get(value, value)
    if mode not in LENGTH_MATCH_MODES:
        raise CPTError(f"--length-match must be one of {', '.join(LENGTH_MATCH_MODES)}, not {value!r}")
    return mode


def length_histogram(lengths: list[int]) -> list[int]:
    """Documents per LENGTH_EDGES bucket (the last bucket is open)."""
    return np.bincount(np.searchsorted(LENGTH_EDGES[1:], lengths, "right"), minlength=len(LENGTH_EDGES)).tolist()


def ks_statistic(a: list[int] | np.ndarray, b: list[int] | np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: the largest gap between the two empirical CDFs."""
    a, b = np.sort(np.asarray(a)), np.sort(np.asarray(b))
    if not len(a) or not len(b):
        return 1.0
    points = np.concatenate([a, b])
    gaps = np.searchsorted(a, points, "right") / len(a) - np.searchsorted(b, points, "right") / len(b)
    return float(np.max(np.abs(gaps)))


def _length_edges(lengths: list[int], bins: int) -> list[int]:
    """Quantile edges of the enriched lengths: strata with equal enriched document counts."""
    quantiles = np.quantile(np.asarray(lengths), np.linspace(0, 1, bins + 1)[1:-1]) if bins > 1 else []
    return sorted({int(q) for q in quantiles})


def _adjust(chosen: dict[str, Candidate], pool: list[Candidate], total: int, target: float, slack: float) -> int:
    """Adds, removes or swaps one document at a time (the move that brings `total` closest to `target`) until
    the total is within `slack`; returns the new total. Used only for the last few documents of a set."""
    unused = sorted((c for c in pool if c.id not in chosen), key=lambda c: c.n_tokens)
    unused_lengths = [c.n_tokens for c in unused]

    def closest_unused(length: float) -> int:
        i = min(int(np.searchsorted(unused_lengths, length)), len(unused) - 1)
        return i - 1 if i > 0 and abs(unused_lengths[i - 1] - length) < abs(unused_lengths[i] - length) else i

    for _ in range(len(pool)):
        gap = target - total
        if abs(gap) <= slack:
            break
        moves = []
        if gap > 0 and unused:
            i = closest_unused(gap)
            moves.append((abs(gap - unused_lengths[i]), None, i))
        if gap < 0 and chosen:
            c = min(chosen.values(), key=lambda c: abs(c.n_tokens + gap))
            moves.append((abs(gap + c.n_tokens), c.id, None))
        if unused:
            for c in chosen.values():
                i = closest_unused(c.n_tokens + gap)
                moves.append((abs(gap - unused_lengths[i] + c.n_tokens), c.id, i))
        if not moves:
            break
        new_gap, removed, added = min(moves, key=lambda m: m[0])
        if new_gap >= abs(gap):
            break
        if removed is not None:
            total -= chosen.pop(removed).n_tokens
        if added is not None:
            c = unused.pop(added)
            unused_lengths.pop(added)
            chosen[c.id] = c
            total += c.n_tokens
    return total


def common_length_range(a: list[int], b: list[int], trim: float = 0.0) -> tuple[int, int] | None:
    """The intersection of the two samples' [trim, 1 - trim] quantile ranges; None when they do not overlap."""
    if not 0 <= trim < 0.5:
        raise CPTError("--length-trim must be at least 0 and below 0.5")
    if not len(a) or not len(b):
        return None
    low = max(int(np.quantile(a, trim, method="lower")), int(np.quantile(b, trim, method="lower")))
    high = min(int(np.quantile(a, 1 - trim, method="higher")), int(np.quantile(b, 1 - trim, method="higher")))
    return (low, high) if low <= high else None


def _common_weights(enriched: list[Candidate], minimized: list[Candidate], bins: int) -> tuple[list[int], list[float]]:
    """Length-bin edges (quantiles of both pools together) and per-bin token shares min(enriched, minimized),
    normalised: the length profile both pools can supply in proportion to their size."""
    edges = _length_edges([c.n_tokens for c in enriched + minimized], bins)
    shares = []
    for pool in (enriched, minimized):
        mass = np.bincount(np.searchsorted(edges, [c.n_tokens for c in pool], "right"),
                           weights=[c.n_tokens for c in pool], minlength=len(edges) + 1)
        shares.append(mass / mass.sum())
    common = np.minimum(*shares)
    return edges, (common / common.sum()).tolist()


def shared_length_edges(a: list[int], b: list[int], bins: int) -> list[int]:
    """Quantile edges of the two pools' lengths, each pool weighted equally (a pool five times larger does not set
    the strata alone): strata both distributions are cut into."""
    if bins <= 1 or not len(a) or not len(b):
        return []
    lengths = np.concatenate([np.asarray(a, dtype=float), np.asarray(b, dtype=float)])
    weights = np.concatenate([np.full(len(a), 0.5 / len(a)), np.full(len(b), 0.5 / len(b))])
    order = np.argsort(lengths, kind="stable")
    cumulative = np.cumsum(weights[order])
    positions = np.searchsorted(cumulative, np.linspace(0, 1, bins + 1)[1:-1], "left")
    return sorted({int(lengths[order][min(p, len(order) - 1)]) for p in positions})


def _bin_mass(pool: list[Candidate], edges: list[int]) -> np.ndarray:
    return np.bincount(np.searchsorted(edges, [c.n_tokens for c in pool], "right"),
                       weights=[c.n_tokens for c in pool], minlength=len(edges) + 1).astype(float)


def best_effort_targets(mass_e: np.ndarray, mass_m: np.ndarray, budget: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-bin token targets for both sets at the full budget, as alike as the two pools allow.

    Where both pools can supply the budget from the mass they share (per bin min(enriched, minimized)), both sets get
    that shared profile scaled to the budget: identical targets. Otherwise both take all of the shared mass and each
    fills the rest from its own surplus bins, placed by a linear program that minimises the largest gap between the
    two cumulative token profiles (the KS statistic of the targets), then the summed gap: the rest comes from the
    strata nearest the other set's."""
    from scipy.optimize import linprog

    shared = np.minimum(mass_e, mass_m)
    if shared.sum() >= budget:
        target = budget * shared / shared.sum()
        return target, target.copy()
    rest = budget - shared.sum()
    surplus_e, surplus_m = mass_e - shared, mass_m - shared
    n = len(shared)
    # Variables: r_e (n), r_m (n), t, u (n - 1). Minimise t + small * sum(u), |cum(r_e - r_m)_k| <= u_k <= t.
    small = 1e-3 / max(n, 1)
    cost = np.concatenate([np.zeros(2 * n), [1.0], np.full(n - 1, small)])
    rows, bounds_upper = [], []
    for k in range(n - 1):
        cum = np.concatenate([np.where(np.arange(n) <= k, 1.0, 0.0), np.where(np.arange(n) <= k, -1.0, 0.0)])
        for sign in (1.0, -1.0):
            row = np.zeros(len(cost))
            row[: 2 * n] = sign * cum
            row[2 * n + 1 + k] = -1.0
            rows.append(row)
            bounds_upper.append(0.0)
        row = np.zeros(len(cost))
        row[2 * n + 1 + k], row[2 * n] = 1.0, -1.0
        rows.append(row)
        bounds_upper.append(0.0)
    equal = np.zeros((2, len(cost)))
    equal[0, :n], equal[1, n: 2 * n] = 1.0, 1.0
    bounds = [(0, s) for s in surplus_e] + [(0, s) for s in surplus_m] + [(0, None)] * n
    solved = linprog(cost, A_ub=np.array(rows) if rows else None, b_ub=np.array(bounds_upper) if rows else None,
                     A_eq=equal, b_eq=[rest, rest], bounds=bounds, method="highs")
    if not solved.success:  # only when a pool holds less than the budget, which the caller checked
        raise CPTError(f"cannot place the {rest:,.0f} tokens the two pools do not share: {solved.message}")
    return shared + solved.x[:n], shared + solved.x[n: 2 * n]


def _fill(pool: list[Candidate], key, targets: dict, high: float, chosen: dict | None = None) -> dict[str, Candidate]:
    """Takes candidates in order while each brings its stratum closer to its target and the total stays below
    `high`; `chosen` (kept) are already in."""
    chosen = dict(chosen or {})
    filled = dict.fromkeys(targets, 0.0)
    for c in chosen.values():
        if key(c) in filled:
            filled[key(c)] += c.n_tokens
    total = sum(c.n_tokens for c in chosen.values())
    for c in pool:
        k = key(c)
        if c.id in chosen or k not in targets or targets[k] - filled[k] < c.n_tokens / 2 or total + c.n_tokens > high:
            continue
        chosen[c.id] = c
        filled[k] += c.n_tokens
        total += c.n_tokens
    return chosen


def token_profile_ks(a: np.ndarray, b: np.ndarray) -> float:
    """Largest gap between two per-bin token profiles' cumulative shares."""
    return float(np.max(np.abs(np.cumsum(a) / a.sum() - np.cumsum(b) / b.sum()))) if a.sum() and b.sum() else 1.0


def _match_best(enriched: list[Candidate], minimized: list[Candidate], budget: int, tolerance: float,
                bins: int) -> tuple[list[Candidate], dict[str, Candidate], dict]:
    """Best-effort length matching at the full budget (see `best_effort_targets`); both lists in seeded random order.
    The enriched set is filled to its per-bin targets; the minimized set to its own, corrected by how far the
    enriched fill landed from its targets (so shared strata follow the set actually drawn), and within a stratum
    by the enriched set's domain mix. Both totals are then adjusted one document at a time."""
    half = tolerance / 2
    low, high = budget * (1 - half), budget * (1 + half)
    for variant, pool in zip(VARIANTS, (enriched, minimized)):
        held = sum(c.n_tokens for c in pool)
        if held < low:
            raise CPTError(f"the {variant} pool holds {held:,} tokens, fewer than --tokens {budget:,}: lower --tokens, "
                           "--min-behaviors or --min-count, raise --oversample, or tag more of the corpus")
    edges = shared_length_edges([c.n_tokens for c in enriched], [c.n_tokens for c in minimized], bins)
    mass_e, mass_m = _bin_mass(enriched, edges), _bin_mass(minimized, edges)
    target_e, target_m = best_effort_targets(mass_e, mass_m, budget)

    def length_bin(c: Candidate) -> int:
        return int(np.searchsorted(edges, c.n_tokens, "right"))

    picked = _fill(enriched, length_bin, dict(enumerate(target_e)), high)
    total_e = sum(c.n_tokens for c in picked.values())
    if total_e < low:
        total_e = _adjust(picked, enriched, total_e, budget, half * budget)
    if abs(total_e - budget) > half * budget:
        raise CPTError(f"cannot fill {budget:,} tokens within {100 * half:g} % from the enriched documents (reached "
                       f"{total_e:,}): its documents are too long for this budget; raise --tokens or --tolerance")
    order = {c.id: i for i, c in enumerate(enriched)}
    chosen_e = sorted(picked.values(), key=lambda c: order[c.id])
    drawn_e = _bin_mass(chosen_e, edges)
    # Shared strata follow what the enriched set actually holds there, within what the minimized pool has.
    goal_m = np.clip(target_m + np.where(target_m > 0, drawn_e - target_e, 0.0), 0.0, mass_m)
    domain_mass: dict[tuple, float] = {}
    for c in chosen_e:
        domain_mass[(c.domain or "", length_bin(c))] = domain_mass.get((c.domain or "", length_bin(c)), 0) + c.n_tokens
    targets: dict[tuple, float] = {}
    for (d, b), mass in domain_mass.items():
        targets[(d, b)] = goal_m[b] * mass / drawn_e[b]
    for b, goal in enumerate(goal_m):
        if drawn_e[b] == 0 and goal > 0:
            targets[("*", b)] = goal
    by_domain = {b for (_, b) in domain_mass}

    def stratum(c: Candidate) -> tuple:
        b = length_bin(c)
        return ((c.domain or "") if b in by_domain else "*", b)

    chosen_m = _fill(minimized, stratum, targets, total_e * (1 + half))
    # A domain the minimized pool lacks: the stratum's deficit is filled from the same length bin in other domains.
    chosen_m = _fill(minimized, length_bin, dict(enumerate(goal_m)), total_e * (1 + half), chosen_m)
    short = [f"{d if d != '*' else '-'} / length bin {b}" for (d, b), t in targets.items()
             if sum(c.n_tokens for c in chosen_m.values() if stratum(c) == (d, b)) < t * (1 - tolerance)]
    total_m = _adjust(chosen_m, minimized, sum(c.n_tokens for c in chosen_m.values()), total_e, half * total_e)
    if abs(total_e - total_m) > half * total_e:
        raise CPTError(f"cannot match {total_e:,} enriched tokens with the minimized pool (reached {total_m:,}; "
                       f"{len(minimized):,} candidates): its documents are too long for the tolerance; "
                       "raise --tolerance")
    details = {"edges": edges, "strata": len(targets), "short": short,
               "target_ks": token_profile_ks(target_e, target_m),
               "shared_tokens": int(np.minimum(mass_e, mass_m).sum()),
               "targets": {"enriched": [round(float(t)) for t in target_e],
                           "minimized": [round(float(t)) for t in target_m]}}
    return chosen_e, chosen_m, details


def match_pools(enriched: list[Candidate], minimized: list[Candidate], budget: int, tolerance: float = 0.01,
                length_bins: int = 10, length_match: str = "none",
                length_trim: float = 0.0,
                removed_before: dict[str, int] | None = None) -> tuple[list[str], list[str], MatchReport]:
    """Both lists in seeded random order. Enriched: taken in order until the budget is reached (within half the
    tolerance). Minimized: filled stratum by stratum (domain x enriched length quantile) to the token mass the
    enriched set has there, then adjusted one document at a time until its total is within half the tolerance of
    the enriched total, so both are within the tolerance of the budget and of each other.

    length_match 'range' first cuts both pools to their common token-length range (`length_trim` quantiles off
    each end of each pool, then intersected): stratified filling cannot match lengths one pool does not have.
    'strict' also fills the enriched set bin by bin to the token shares both pools can supply (see
    `_common_weights`), so the minimized set is not asked for lengths that are rare in its pool; it refuses when the
    common range holds too few tokens. 'best' never cuts: see `_match_best`. `removed_before`: candidates per pool the
    caller already left out for their length, counted in that refusal."""
    if not 0 < tolerance < 0.5:
        raise CPTError("--tolerance must be between 0 and 0.5")
    length_match = length_match_mode(length_match)
    if length_match == "best":
        chosen_e, chosen_m, best = _match_best(enriched, minimized, budget, tolerance, length_bins)
        ids_m = [c.id for c in minimized if c.id in chosen_m]
        lengths_m = [chosen_m[i].n_tokens for i in ids_m]
        report = MatchReport(
            budget=budget, tolerance=tolerance, enriched_tokens=sum(c.n_tokens for c in chosen_e),
            minimized_tokens=sum(lengths_m), enriched_documents=len(chosen_e), minimized_documents=len(ids_m),
            ks_statistic=ks_statistic([c.n_tokens for c in chosen_e], lengths_m), length_edges=best["edges"],
            strata=best["strata"], strata_short=best["short"], length_match=length_match,
            length_targets=best["targets"], target_ks=best["target_ks"], shared_tokens=best["shared_tokens"])
        _pool_figures(report, enriched, minimized, [c.n_tokens for c in chosen_e], lengths_m)
        return [c.id for c in chosen_e], ids_m, report
    half = tolerance / 2
    low, high = budget * (1 - half), budget * (1 + half)
    length_range, removed, weights = None, {}, None
    all_enriched, all_minimized = enriched, minimized
    if length_match != "none":
        length_range = common_length_range([c.n_tokens for c in enriched], [c.n_tokens for c in minimized], length_trim)
        if length_range is None:
            raise CPTError("the enriched and minimized candidates share no token-length range: lower --length-trim "
                           "or use --length-match none")
        kept = {v: [c for c in pool if length_range[0] <= c.n_tokens <= length_range[1]]
                for v, pool in zip(VARIANTS, (enriched, minimized))}
        removed = {"enriched": len(enriched) - len(kept["enriched"]),
                   "minimized": len(minimized) - len(kept["minimized"])}
        enriched, minimized = kept["enriched"], kept["minimized"]
    targets = None
    if length_match == "strict":
        weight_edges, weights = _common_weights(enriched, minimized, length_bins)
        targets = [budget * w for w in weights]
        filled_bins = [0] * len(targets)
    chosen_e, total_e = [], 0
    for candidate in enriched:
        if total_e >= low:
            break
        if targets is not None:
            b = int(np.searchsorted(weight_edges, candidate.n_tokens, "right"))
            # As for the minimized strata: take the document while it brings its bin closer to its target.
            if targets[b] - filled_bins[b] < candidate.n_tokens / 2:
                continue
            filled_bins[b] += candidate.n_tokens
        # A document that would overshoot is passed over only in the last few documents of the budget.
        if total_e + candidate.n_tokens <= high:
            chosen_e.append(candidate)
            total_e += candidate.n_tokens
        elif targets is not None:
            filled_bins[b] -= candidate.n_tokens
    available = sum(c.n_tokens for c in enriched)
    if available < low:
        # Candidates cut before this call (the character range build_pool applies to every candidate) count too.
        outside = removed["enriched"] + (removed_before or {}).get("enriched", 0) if length_range else 0
        where = (f" inside the common length range {length_range[0]:,}-{length_range[1]:,} tokens ({outside:,} "
                 "candidates outside it)" if length_range else "")
        raise CPTError(f"the enriched pool holds {available:,} tokens{where}, fewer than --tokens {budget:,}: lower "
                       "--tokens, --min-behaviors or --min-count, or tag more of the corpus"
                       + (", or raise --oversample, or use --length-match best (the default: it matches the lengths as "
                          "closely as both pools allow at the full budget)" if length_range else ""))
    if total_e < low:
        picked = {c.id: c for c in chosen_e}
        total_e = _adjust(picked, enriched, total_e, budget, half * budget)
        order = {c.id: i for i, c in enumerate(enriched)}
        chosen_e = sorted(picked.values(), key=lambda c: order[c.id])
        if abs(total_e - budget) > half * budget:
            raise CPTError(f"cannot fill {budget:,} tokens within {100 * half:g} % from the enriched documents "
                           f"(reached {total_e:,}): its documents are too long for this budget; raise --tokens or "
                           "--tolerance")
    edges = _length_edges([c.n_tokens for c in chosen_e], length_bins)

    def stratum(c: Candidate) -> tuple:
        return (c.domain or "", int(np.searchsorted(edges, c.n_tokens, "right")))

    target: dict[tuple, int] = {}
    for c in chosen_e:
        target[stratum(c)] = target.get(stratum(c), 0) + c.n_tokens
    filled = dict.fromkeys(target, 0)
    chosen_m: dict[str, Candidate] = {}
    for c in minimized:
        s = stratum(c)
        # Take the document while it brings the stratum closer to its target.
        if s in target and target[s] - filled[s] >= c.n_tokens / 2:
            chosen_m[c.id] = c
            filled[s] += c.n_tokens
    short = [f"{d or '-'} / length bin {b}" for (d, b), t in target.items() if filled[(d, b)] < t * (1 - tolerance)]
    # A domain the minimized pool lacks: its deficit is filled from the same length bin in other domains.
    deficit: dict[int, int] = {}
    for (d, b), t in target.items():
        if filled[(d, b)] < t * (1 - tolerance):
            deficit[b] = deficit.get(b, 0) + t - filled[(d, b)]
    for c in minimized:
        b = stratum(c)[1]
        if c.id not in chosen_m and deficit.get(b, 0) >= c.n_tokens / 2:
            chosen_m[c.id] = c
            deficit[b] -= c.n_tokens
    total_m = sum(c.n_tokens for c in chosen_m.values())
    total_m = _adjust(chosen_m, minimized, total_m, total_e, half * total_e)
    if abs(total_e - total_m) > half * total_e:
        raise CPTError(f"cannot match {total_e:,} enriched tokens with the minimized pool (reached {total_m:,}; "
                       f"{len(minimized):,} candidates): the minimized pool is too small or its documents too long "
                       "for the tolerance" + (" inside the common length range; try --length-match best"
                                              if length_range else ""))
    order = {c.id: i for i, c in enumerate(minimized)}
    ids_m = sorted(chosen_m, key=order.__getitem__)
    report = MatchReport(
        budget=budget, tolerance=tolerance, enriched_tokens=total_e, minimized_tokens=total_m,
        enriched_documents=len(chosen_e), minimized_documents=len(ids_m),
        ks_statistic=ks_statistic([c.n_tokens for c in chosen_e], [chosen_m[i].n_tokens for i in ids_m]),
        length_edges=edges, strata=len(target), strata_short=short, length_match=length_match,
        length_range=list(length_range) if length_range else None, length_removed=removed, length_weights=weights,
    )
    _pool_figures(report, all_enriched, all_minimized, [c.n_tokens for c in chosen_e],
                  [chosen_m[i].n_tokens for i in ids_m])
    return [c.id for c in chosen_e], ids_m, report


def _pool_figures(report: MatchReport, enriched: list[Candidate], minimized: list[Candidate], lengths_e: list[int],
                  lengths_m: list[int]) -> None:
    """Pool sizes, the share of each pool's tokens its set uses, and the length histograms of pools and sets."""
    for variant, pool, lengths in (("enriched", enriched, lengths_e), ("minimized", minimized, lengths_m)):
        held = sum(c.n_tokens for c in pool)
        report.pool_tokens[variant], report.pool_documents[variant] = held, len(pool)
        report.pool_used[variant] = sum(lengths) / held if held else 0.0
        report.length_histogram[f"{variant}_pool"] = length_histogram([c.n_tokens for c in pool])
        report.length_histogram[variant] = length_histogram(lengths)


def length_removed(pools: dict, report: MatchReport) -> dict[str, int]:
    """Candidates each pool lost to the common length range: at selection (characters) plus at matching (tokens)."""
    return {v: int((pools.get("length_removed_chars") or {}).get(v, 0)) + int(report.length_removed.get(v, 0))
            for v in VARIANTS}
