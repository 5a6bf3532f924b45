"""The hand-off job configs (see curate.pipelines.jobs): what `curate export` (and the export flow), `curate
filter-passrate`, `curate audit-verifier`, `curate audit-policy`, `curate handoff` and `curate publish` (and the publish
flow) take. Light: `--help` reads them; the jobs run in their hand-off modules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.options import EXECUTOR, OUTPUT_PANEL, SERVER, group, option, shared
from curate.pipelines.executor_options import LOCAL, ExecutorOptions

if TYPE_CHECKING:  # they import datatrove
    from curate.handoff.sampling import SamplingOptions
    from curate.pipelines.llm.options import ServerOptions


@dataclass(frozen=True, kw_only=True)
class ExportJob:
    """Export a built dataset for a trainer: verl, TRL (GRPO), OpenRLHF, SFT {query, completion} or CPT text."""

    dataset: Path = option("Built dataset (DATASET/data/SPLIT-*.parquet) or parquet file/folder.", argument=True)
    to: str = option("verl | trl | openrlhf | sft | cpt", "--to")
    output: Path = option("Export directory (OUTPUT/data/SPLIT-*.parquet).", "--output", "-o", panel=OUTPUT_PANEL)
    instruction: str | None = option("Appended to every prompt; default: the reward's own answer-format instruction; "
                                     "'' for none.", default=None)
    system: str | None = shared("system")
    overwrite: bool = shared("overwrite")


@dataclass(frozen=True, kw_only=True)
class PassRateJob:
    """Keep the prompts a policy solves sometimes but not always: k samples per prompt, scored by the row's reward."""

    dataset: Path = option("Built dataset with RL columns (question, data_source, ground truth).")
    model: str = option("The policy: hub name or local directory.")
    output: Path = option("Filtered dataset (OUTPUT/data), samples (OUTPUT/rates).", "--output", "-o",
                          panel=OUTPUT_PANEL)
    k: int = option("Samples per prompt.", default=8, min=1)
    band: str = option("LOW,HIGH: keep prompts whose pass rate is strictly inside.", default="0,1")
    instruction: str | None = shared("instruction")
    limit: int = option("Sample at most this many prompts (-1: all).", default=-1)
    overwrite: bool = shared("overwrite")
    # The policy's server and how it is sampled (SamplingOptions), holding `model`, `k` and `instruction` too.
    server: SamplingOptions = group(SERVER, config="sampling", sampling=True, also=("k", "instruction"))
    executor: ExecutorOptions = group(EXECUTOR, default=LOCAL)


@dataclass(frozen=True, kw_only=True)
class VerifierAuditJob:
    """Measure rewards' precision and recall on labeled pairs, or on the policy's own responses (on-policy)."""

    pairs: list[Path] | None = option(
        "Labeled pairs, jsonl or parquet (repeatable): the hand-built {id, gold, candidate, equivalent} file, GSM8K "
        "example_model_solutions.jsonl, Sky-T1 traces, a PRM800K stepwise-critic parquet, or any table (see "
        "--pairs-format).", default=None)
    pairs_format: str = option("auto | pairs | table | gsm8k | skythought | prm800k.", default="auto")
    response_key: str = option("table: the column holding the model response.", default="response")
    gold_key: str = option("table: the column holding the gold answer.", default="gold")
    label_key: str = option("table: the reference correctness label (true/false, 1/0).", default="label")
    id_key: str | None = option("table: the id column (default: FILE/LINE).", default=None)
    group_key: str | None = option("table: responses to one problem share it; the bootstrap resamples groups.",
                                   default=None)
    reward: list[str] | None = option("Registered reward (data_source or short name); repeat to compare several side "
                                      "by side (math, mathverify-plain, boxed-exact, last-number).", default=None)
    by_behavior: str | None = option("Classifier that tags each response (cues, llm, distilled:DIR, a versioned "
                                     "name): precision/recall with and without each behavior.", "--by-behavior",
                                     default=None)
    report: Path | None = option("Write every figure as JSON (by_behavior, by_length, per reward).", default=None,
                                 panel=OUTPUT_PANEL)
    plot: Path | None = option("Recall with/without per behavior and by length quartile, PNG (default: next to "
                               "--report).", default=None, panel=OUTPUT_PANEL)
    bootstrap: int = option("Bootstrap resamples for the 95 % intervals.", default=2000, min=100)
    seed: int = option("Bootstrap seed.", default=0)
    verdicts: Path | None = option("Write each pair's verdict (id, verdict true/false/null).", default=None,
                                   panel=OUTPUT_PANEL)
    threads: int = option("Pairs scored at the same time.", default=4, min=1)
    show: int = option("Slowest cases and wrong verdicts to list.", default=10, min=0)
    policy: str | None = option("On-policy: sample this model (hub name or local directory) on --problems and audit "
                                "the rewards on its own responses, instead of --pairs.", default=None)
    problems: Path | None = option("On-policy: a built dataset (question, answer, data_source) or a jsonl/parquet "
                                   "file with question and answer columns.", default=None)
    k: int = option("On-policy: responses per problem.", default=8, min=1)
    n: int = option("On-policy: at most this many problems (-1: all).", default=-1, min=-1)
    question_key: str = option("On-policy, jsonl/parquet problems: the question column.", default="question")
    answer_key: str = option("On-policy, jsonl/parquet problems: the gold answer column.", default="answer")
    data_source: str = option("On-policy, jsonl/parquet problems: the reward whose answer-format instruction the "
                              "prompt gets.", default="curate/math")
    judge_max_tokens: int = option("On-policy, with --judge-model: the LLM judge's answer budget.", default=512, min=1)
    label: str = option("On-policy reference label: strict (last \\boxed{} by math-verify), llm (the judge), agree "
                        "(only responses both label alike).", default="strict")
    output: Path = option("On-policy: samples, verdicts and report (a rerun reuses them).", "--output", "-o",
                          default=Path("verifier-audit"), panel=OUTPUT_PANEL)
    overwrite: bool = option("On-policy: --output holds samples or LLM verdicts made with other settings: remove "
                             "them, then sample and judge again.", "--overwrite", default=False, panel=OUTPUT_PANEL)
    # The policy's server and how it is sampled (SamplingOptions, holding `policy` as its model, and `k`).
    server: SamplingOptions = group(SERVER, config="sampling", model="policy", sampling=True, judge=True,
                                    also=("k",))
    # The LLM judge's server: what the group's --judge-* flags make of the policy's (curate.cli.groups.judge_server);
    # None without --judge-model.
    judge: ServerOptions | None = None


@dataclass(frozen=True, kw_only=True)
class PolicyAuditJob:
    """Sample a policy on a task, label the behaviors in its outputs, report each behavior's rate and the accuracy."""

    model: str | None = option("The policy: hub name or local directory (or --checkpoints, --rollouts).",
                               default=None)
    output: Path = option("Report, samples and prompts.", "--output", "-o", default=Path("policy-audit"),
                          panel=OUTPUT_PANEL)
    task: str | None = option("Generated task: countdown (default unless --dataset).", default=None)
    dataset: Path | None = option("Prompts from a built dataset with RL columns instead of a task.", default=None)
    n: int = option("Prompts.", default=200, min=1)
    k: int = option("Samples per prompt.", default=1, min=1)
    seed: int = option("Seed of the generated task prompts.", default=0)
    classifier: str = option("Labels the behaviors of every response: a batch classifier (cues, distilled:DIR, a "
                             "versioned name), or llm_v1 / cascade_v1 in-line on the model --judge-model names. A "
                             "Countdown response is read below its problem, as the labeled sets were.",
                             "--classifier", "-c", default="cues")
    checkpoints: str | None = option("A glob of checkpoint directories of one training run ('ckpts/step_*'): one "
                                     "audit each, in step order, into OUTPUT/<checkpoint>, and plots of behaviors "
                                     "and accuracy over steps.", default=None)
    rollouts: Path | None = option("The rollouts a training run logged, read without sampling again: verl's "
                                   "trainer.rollout_data_dir ({step}.jsonl) or TRL's output_dir (completions/"
                                   "completions_*.parquet, log_completions=True); the same plots and sweep.json as "
                                   "--checkpoints.", default=None)
    score_column: str | None = option("--rollouts from TRL: the reward column whose full mark (1.0) means correct "
                                      "(default: the only reward column).", default=None)
    prompt_format: str = option("chat (messages, /v1/chat/completions) or tinyzero (the raw TinyZero completion "
                                "prompt through /v1/completions, for base models).", default="chat")
    # The policy's server and how it is sampled (SamplingOptions, holding `model`, `k` and `prompt_format` too).
    server: SamplingOptions = group(SERVER, config="sampling", sampling=True, judge=True, also=("k", "prompt_format"))
    # The LLM judge's server: what the group's --judge-* flags make of the policy's (curate.cli.groups.judge_server);
    # None without --judge-model.
    judge: ServerOptions | None = None


@dataclass(frozen=True, kw_only=True)
class HandoffJob:
    """Write what to run next: verl (config fragment + run_verl.sh) or TRL (train_sft.py / train_grpo.py), with the
    export."""

    dataset: Path = option("Built dataset (DATASET/data/SPLIT-*.parquet).", argument=True)
    trainer: str = option("verl | trl")
    output: Path = option("Kit directory: exports, config/scripts, README.md.", "--output", "-o", panel=OUTPUT_PANEL)
    instruction: str | None = shared("instruction")
    system: str | None = shared("system")
    tokenizer: str | None = option("The policy's tokenizer (hub name or local directory): counts the longest prompt "
                                   "for verl's data.max_prompt_length; default: a bound from its bytes.", default=None)
    overwrite: bool = shared("overwrite")


@dataclass(frozen=True, kw_only=True)
class PublishJob:
    """Check a built dataset and push it to the Hugging Face Hub as one commit (the token: HF_TOKEN)."""

    directory: Path = option("A built dataset: data files + README.md card.", argument=True)
    repo_id: str = option("Dataset repo on the Hub, ORG/NAME.", "--repo-id")
    private: bool = option("Create the repo private (an existing repo keeps its visibility).", default=False)
    dry_run: bool = option("Validate and list what would be uploaded; upload nothing.", default=False)
    include_rejects: bool = option("Upload rejects/ (records dropped, with reasons) too.", default=True)
    endpoint: str | None = option("Hub endpoint (default: HF_ENDPOINT or huggingface.co).", default=None)
    commit_message: str | None = option("Commit message.", "--message", default=None)
