"""`vllm serve` as curate starts it: which executable, which version, which flags, and a first start that
does not spend its retries waiting for another task.

- The executable is looked up next to the running interpreter first, then on PATH: `.venv/bin/curate tag-llm`
  works without an activated venv (datatrove starts a bare `vllm`, which only PATH resolves).
- Its version must lie in SUPPORTED_VLLM, the range of pyproject's `gpu` extra (a test keeps the two equal);
  outside it the run stops before any task with the range and the fix.
- Flags whose name changed between versions are chosen here: `--reasoning-parser` alone from 0.10 on,
  with `--enable-reasoning` before (0.8.5 needs both; 0.11 removed the second).
- datatrove's compile lock (one first start at a time per configuration, so that torch.compile caches are not
  written twice) is taken with a blocking flock inside the event loop, inside the start timeout: a second local
  task then stalls its whole loop until task 0's server is up and its timeout fires on return. Here the lock is
  polled, before the first attempt and outside its timeout.

Private datatrove hooks used: VLLMServer._start_vllm_task, VLLMServer._get_compile_lock,
InferenceServer.bg_start_server, CompileLockManager.lock_path/marker_path/_lock_file (tests/pipelines/
test_datatrove_hooks.py checks they exist; pyproject bounds datatrove to the versions checked).
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from datatrove.pipeline.inference.servers import InferenceServer, VLLMServer
from datatrove.pipeline.inference.servers.compile_lock import CompileLockManager, compute_config_hash
from loguru import logger
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from curate.errors import CurateError

# Equal to the `gpu` extra in pyproject.toml (tests/pipelines/test_vllm_contract.py checks it). Chosen so that
# `pip install -e '.[gpu]'` keeps what curate needs: transformers 5 (sentence-transformers>=6), torch 2.13 and
# prefect's fastapi. Below it, vLLM 0.8.5-0.19 read tokenizer attributes transformers 5 removed; above it, vLLM
# pins transformers below the installed one (0.31+) or fastapi below prefect's floor (0.24+).
SUPPORTED_VLLM = ">=0.20.2,<0.23"
REASONING_FLAG_FROM = Version("0.10.0")  # --reasoning-parser alone; before: --enable-reasoning --reasoning-parser
QWEN3_PARSER_FROM = Version("0.11.0")


class VLLMSetupError(CurateError, ValueError):
    """vLLM is missing, outside SUPPORTED_VLLM, or lacks a flag asked for; the message says what to install."""


def interpreter_bin() -> Path:
    return Path(sys.executable).parent


def executable_path() -> str:
    """Where `vllm` is looked up: the running interpreter's bin directory first, then PATH."""
    return os.pathsep.join([str(interpreter_bin()), os.environ.get("PATH", "")])


def find_vllm() -> str | None:
    return shutil.which("vllm", path=executable_path())


@lru_cache(maxsize=8)
def vllm_version(executable: str) -> Version:
    """The version of the vllm that `executable` runs: this interpreter's package metadata when it lives next to
    the interpreter, else what `vllm --version` prints (a vllm of another environment found on PATH)."""
    if Path(executable).parent == interpreter_bin():
        try:
            return Version(importlib.metadata.version("vllm"))
        except importlib.metadata.PackageNotFoundError:
            pass
    try:
        done = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise VLLMSetupError(f"cannot run `{executable} --version` ({error})") from error
    found = re.findall(r"\b(\d+\.\d+(?:\.\d+)?(?:\.post\d+|rc\d+|\.dev\d+)?)\b", done.stdout + "\n" + done.stderr)
    try:
        return Version(found[-1])
    except (IndexError, InvalidVersion):
        raise VLLMSetupError(f"`{executable} --version` printed no version: {(done.stdout + done.stderr)[-300:]!r}") from None


def check_vllm() -> tuple[str, Version]:
    """The executable and version a `--backend vllm` run will start, or a VLLMSetupError that says how to fix it."""
    executable = find_vllm()
    if executable is None:
        raise VLLMSetupError(
            f"--backend vllm needs the `vllm` executable; none next to {sys.executable} or on PATH. "
            f"On a GPU machine: pip install 'curate[gpu]' (vllm{SUPPORTED_VLLM})")
    version = vllm_version(executable)
    if version not in SpecifierSet(SUPPORTED_VLLM):
        raise VLLMSetupError(
            f"vLLM {version} ({executable}) is outside the range curate supports, vllm{SUPPORTED_VLLM}: older ones "
            "fail on the transformers 5 tokenizers this install has, newer ones pin transformers, torch or fastapi "
            f"below what curate needs. Fix: pip install 'curate[gpu]' in this environment (or "
            f"pip install 'vllm{SUPPORTED_VLLM}'), or put a supported vllm first on PATH.")
    return executable, version


def reasoning_flags(parser: str, version: Version) -> dict:
    """Server flags (datatrove model_kwargs) that turn on vLLM's reasoning parser in `version`."""
    if parser == "qwen3" and version < QWEN3_PARSER_FROM:
        raise VLLMSetupError(f"vLLM {version} has no 'qwen3' reasoning parser (it came in {QWEN3_PARSER_FROM}); "
                             "use --reasoning-parser deepseek_r1, which reads the same <think> tags")
    if version < REASONING_FLAG_FROM:
        return {"enable-reasoning": True, "reasoning-parser": parser}
    return {"reasoning-parser": parser}


class PollingCompileLock(CompileLockManager):
    """datatrove's compile lock (same file, same marker), taken by polling so the event loop keeps running."""

    poll_seconds = 2.0

    async def acquire_polling(self) -> None:
        if self._lock_file is not None or self.cache_exists():
            return
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(str(self.lock_path), os.O_CREAT | os.O_RDWR)
        waited = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waited:
                    logger.info(f"waiting for another task's first vLLM start with this configuration ({self.lock_path})")
                    waited = True
                await asyncio.sleep(self.poll_seconds)
            except BaseException:
                os.close(handle)
                raise
        self._lock_file = handle
        if self.cache_exists():  # the other task finished its first start while this one waited
            self.release()

    def acquire(self) -> bool:
        # Called by VLLMServer.start_server after acquire_polling: never blocks.
        return self._lock_file is not None


class CurateVLLMServer(VLLMServer):
    """datatrove's VLLMServer with the executable resolved as above and the compile lock polled."""

    def __init__(self, config, rank: int):
        # VLLMServer.__init__ only adds an import check of the `vllm` module to this; curate checked the
        # executable and its version before any task started (a vllm from PATH need not be importable here).
        InferenceServer.__init__(self, config, rank)
        self._compile_lock = None

    def _get_compile_lock(self) -> PollingCompileLock:
        if self._compile_lock is None:
            self._compile_lock = PollingCompileLock(compute_config_hash(
                model_name_or_path=self.config.model_name_or_path, tp=self.config.tp, pp=self.config.pp,
                dp=self.config.dp, model_max_context=self.config.model_max_context, model_kwargs=self.config.model_kwargs))
        return self._compile_lock

    async def bg_start_server(self) -> None:
        # Outside the start timeout: a task waits as long as another's first start (compilation) takes.
        await self._get_compile_lock().acquire_polling()
        await super().bg_start_server()

    async def start_server(self):
        await self._get_compile_lock().acquire_polling()  # a retry re-takes the lock the failed attempt released
        return await super().start_server()

    async def _start_vllm_task(self) -> asyncio.subprocess.Process:
        # datatrove execs a bare "vllm", resolved on the PATH of the environment it passes (a copy of os.environ,
        # taken before its first await): put the interpreter's bin directory first for that call.
        path = os.environ.get("PATH", "")
        os.environ["PATH"] = executable_path()
        try:
            return await super()._start_vllm_task()
        finally:
            os.environ["PATH"] = path
