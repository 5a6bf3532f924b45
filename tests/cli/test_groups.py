"""The executor options are declared once (curate.cli.groups) and reach every command that runs datatrove tasks; so
do the model-server options, to every command that samples a policy or runs a judge."""

from __future__ import annotations

import dataclasses
from dataclasses import fields

import typer.main
from typer.testing import CliRunner

from curate.cli import app
from curate.cli.groups import (
    FLAGS,
    INPUT_FLAGS,
    JUDGE_FLAGS,
    SAMPLING_FLAGS,
    SERVER_FLAGS,
    cleaning_group,
    executor_group,
    input_group,
    server_group,
)
from curate.cli.options import sampling_config
from curate.handoff.passrate import SamplingOptions
from curate.pipelines.cleaning import Cleaning
from curate.pipelines.executor_options import ExecutorOptions
from curate.pipelines.llm.options import ServerOptions
from curate.pipelines.readers import InputSpec


def test_every_executor_option_has_a_flag():
    # env_command is derived from the running environment, not chosen by the user.
    assert set(FLAGS) | {"env_command"} == {f.name for f in fields(ExecutorOptions)}
    # So does every InputSpec field but a hub dataset's config.
    assert set(INPUT_FLAGS) | {"config"} == {f.name for f in fields(InputSpec)}


def test_commands_that_run_tasks_show_the_executor_panel_and_validate_the_options(tmp_path):
    group = typer.main.get_command(app)
    runs_tasks = [name for name, command in group.commands.items()
                  if any("--slurm-partition" in p.opts for p in command.params)]
    assert set(runs_tasks) == {"tag", "tag-llm", "build", "dedup", "decontam", "cpt", "filter-passrate"}
    for name in runs_tasks:
        executor = [p for p in group.commands[name].params if {"--executor", "--tasks", "--workers"} & set(p.opts)]
        assert len(executor) == 3 and {p.rich_help_panel for p in executor} == {"Executor"}, name
    # mcqa's --workers (processes checking answers) is its own option, not the executor's.
    mcqa = {p.name: p for p in group.commands["mcqa"].params}
    assert mcqa["workers"].rich_help_panel is None and "tasks" not in mcqa
    result = CliRunner().invoke(app, ["tag", "--executor", "slurm", "--output", str(tmp_path / "tags")])
    assert result.exit_code == 2 and "needs --slurm-partition" in result.output
    assert not (tmp_path / "tags").exists()


def test_executor_group_hands_tasks_and_workers_in_the_options_unless_the_command_goes_without():
    seen = {}
    local = typer.Typer()

    @local.command()
    @executor_group
    def run(*, runs_on: ExecutorOptions) -> None:
        seen["runs_on"] = runs_on

    assert CliRunner().invoke(local, ["--tasks", "4", "--workers", "2"]).exit_code == 0
    assert seen["runs_on"] == ExecutorOptions(tasks=4, workers=2)
    refused = CliRunner().invoke(local, ["--workers", "0"])
    assert refused.exit_code == 2 and "--workers" in refused.output

    once = typer.Typer()

    @once.command()
    @executor_group(without=("tasks", "workers"))
    def run_once(*, runs_on: ExecutorOptions) -> None:
        seen["runs_on"] = runs_on

    assert CliRunner().invoke(once, []).exit_code == 0 and seen["runs_on"] == ExecutorOptions()
    unoffered = CliRunner().invoke(once, ["--tasks", "4"])
    assert unoffered.exit_code == 2 and "No such option" in unoffered.output


# The options that say where and how a command writes its result, by command: the output folder and the claim on it,
# the files written beside it, what the written dataset carries besides its rows.
OUTPUT_OPTIONS = {
    "tag": {"output"}, "tag-llm": {"output"}, "distill": {"output"}, "stats": {"plot"},
    "build": {"output", "overwrite", "license", "keep_columns"}, "cpt": {"output", "overwrite", "license"},
    "multihop": {"output", "overwrite", "license"}, "priming": {"output", "overwrite"}, "mcqa": {"output", "overwrite"},
    "dedup": {"output", "overwrite"}, "decontam": {"output", "overwrite"}, "export": {"output", "overwrite"},
    "filter-passrate": {"output", "overwrite"}, "handoff": {"output", "overwrite"}, "audit-policy": {"output"},
    "audit-verifier": {"output", "overwrite", "report", "plot", "verdicts"},
    "review": {"output"}, "calibrate": {"output", "card"}, "adapt": {"models"},
}


def test_the_options_that_say_where_and_how_the_result_is_written_show_in_the_output_panel():
    group = typer.main.get_command(app)
    placed = {name: {p.name for p in command.params if p.rich_help_panel == "Output"}
              for name, command in group.commands.items()}
    assert {name: names for name, names in placed.items() if names} == OUTPUT_OPTIONS
    shown = CliRunner().invoke(app, ["build", "--help"], env={"COLUMNS": "200"}).output
    output_panel = shown.split("─ Output ─")[1].split("╰")[0]
    assert all(flag in output_panel for flag in ("--output", "--overwrite", "--license", "--keep-columns")), shown


def test_the_llm_commands_show_the_model_server_panel():
    group = typer.main.get_command(app)
    flags = {f.parameter for f in (SERVER_FLAGS | SAMPLING_FLAGS).values()}
    for name in ("audit-verifier", "audit-policy", "filter-passrate"):
        panels = {p.name: p.rich_help_panel for p in group.commands[name].params}
        assert {panels[f] for f in flags} == {"Model server"}, name
    for name in ("audit-verifier", "audit-policy"):
        panels = {p.name: p.rich_help_panel for p in group.commands[name].params}
        assert {panels[f.parameter] for f in JUDGE_FLAGS.values()} == {"Model server"}, name
    # The taggers' server options come from the same declaration; tag's LLM route takes no parallelism flags.
    for name, offered in (("tag-llm", SERVER_FLAGS), ("tag", {k: f for k, f in SERVER_FLAGS.items() if k not in ("tp", "dp")})):
        panels = {p.name: p.rich_help_panel for p in group.commands[name].params}
        assert {panels[f.parameter] for f in offered.values()} == {"Model server"}, name
    assert "tp" not in {p.name for p in group.commands["tag"].params}


def test_server_group_hands_one_config_and_the_judge_a_server_of_its_own():
    seen = {}
    local = typer.Typer()

    @local.command()
    @server_group(config=sampling_config, sampling=True, judge=True, also=("k",))
    def sample(model: str = "policy", k: int = 2, *, server: SamplingOptions, judge: ServerOptions | None) -> None:
        seen.update(server=server, judge=judge)

    argv = ["--backend", "endpoint", "--endpoint-url", "http://policy:8000/v1", "--server-arg", "max-num-seqs=8",
            "--server-arg", "--enforce-eager", "--temperature", "0.5", "--k", "4", "--concurrency", "3"]
    result = CliRunner().invoke(local, argv)
    assert result.exit_code == 0, result.output
    assert seen["server"] == SamplingOptions(model="policy", k=4, backend="endpoint",
                                             endpoint_url="http://policy:8000/v1", concurrency=3, temperature=0.5,
                                             server_args={"max-num-seqs": "8", "enforce-eager": True})
    assert seen["judge"] is None
    # On the policy's backend the judge takes its URL; on another it takes none it was not given.
    assert CliRunner().invoke(local, [*argv, "--judge-model", "judge"]).exit_code == 0
    assert seen["judge"] == dataclasses.replace(seen["server"].server, model="judge")
    assert type(seen["judge"]) is ServerOptions
    assert CliRunner().invoke(local, [*argv, "--judge-model", "judge", "--judge-backend", "vllm"]).exit_code == 0
    assert (seen["judge"].backend, seen["judge"].endpoint_url, seen["judge"].concurrency) == ("vllm", None, 3)


CLEANING_HELP = {  # what each builder judges, kept from the flags each command declared itself
    "build": "from the built dataset.",
    "multihop": "from the source problems before chaining.",
    "priming": "(judged on the completion).",
    "mcqa": "(judged on the question).",
    "cpt": "from the candidates first.",
}


def test_the_builders_show_the_cleaning_panel_with_their_own_help_and_the_readers_the_input_panel():
    group = typer.main.get_command(app)
    cleans = [name for name, command in group.commands.items() if any("--dedup" in p.opts for p in command.params)]
    assert set(cleans) == set(CLEANING_HELP)
    for name, ending in CLEANING_HELP.items():
        params = {p.name: p for p in group.commands[name].params}
        assert {params[f].rich_help_panel for f in ("dedup", "decontam", "benchmarks_dir")} == {"Cleaning"}, name
        assert params["dedup"].help.endswith(ending), name
    reads = {"tag": "input", "tag-llm": "input", "build": "input", "eval-gate": "input", "cpt": "texts",
             "distill": "texts"}
    for name, path in reads.items():
        params = {p.name: p for p in group.commands[name].params}
        assert {params[f].rich_help_panel for f in (path, "text_key", "id_key", "split", "streaming")} == {"Input"}
        assert params[path].required == (path == "texts"), name


def test_cleaning_and_input_groups_hand_one_validated_config(tmp_path):
    seen = {}
    local = typer.Typer()

    @local.command()
    @cleaning_group(dedup="Dedup.", decontam="Decontam.")
    @input_group
    def read(limit: int = 1, *, cleaning: Cleaning, corpus: InputSpec) -> None:
        seen.update(cleaning=cleaning, corpus=corpus)

    (tmp_path / "a.jsonl").write_text('{"id": "1", "body": "x"}\n')
    bench = tmp_path / "bench.jsonl"
    bench.write_text('{"question": "What is 1 + 1?"}\n')
    argv = ["--input", str(tmp_path / "*.jsonl"), "--text-key", "body", "--split", "test", "--dedup",
            "--decontam", f"{bench}=question"]
    result = CliRunner().invoke(local, argv)
    assert result.exit_code == 0, result.output
    assert seen["cleaning"] == Cleaning(dedup=True, decontam=f"{bench}=question")
    assert seen["corpus"] == InputSpec(path=str(tmp_path / "*.jsonl"), text_key="body", split="test")
    seen.clear()
    assert CliRunner().invoke(local, []).exit_code == 0
    assert seen["corpus"].path.endswith("sample_data/corpus/*.jsonl") and seen["cleaning"] == Cleaning()


def test_a_bad_cleaning_option_fails_before_the_build_writes_anything(tmp_path):
    bench = tmp_path / "bench.jsonl"
    bench.write_text('{"question": "What is 1 + 1?"}\n')
    for options, message in ((["--decontam", "no_such_benchmark"], "no_such_benchmark"),
                             (["--decontam", " , "], "names no benchmark"),
                             (["--decontam", "gsm8k", "--benchmarks-dir", str(tmp_path / "nowhere")], "not a directory"),
                             (["--benchmarks-dir", str(tmp_path)], "applies to --decontam only")):
        result = CliRunner().invoke(app, ["build", "--behaviors", "backtracking", "--output", str(tmp_path / "ds"),
                                          *options])
        assert result.exit_code == 2 and message in result.output, options
        assert not (tmp_path / "ds").exists()
    # A file benchmark and the built-in names under --benchmarks-dir pass the same check the decontamination makes.
    Cleaning(decontam=f"{bench}=question").validate()
