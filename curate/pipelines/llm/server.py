"""The one translation of the server options every job that calls a model shares (ServerOptions, in
curate.pipelines.llm.options: tagging, CPT rewrite, pass-rate sampling, the LLM writers, the judges) into datatrove's
InferenceConfig, and the runner those jobs share.

Backends: `vllm` (InferenceRunner spawns `vllm serve`, tp/dp), `endpoint` (any OpenAI-compatible URL; key from
CURATE_API_KEY or OPENAI_API_KEY), `transformers` (spawns `transformers serve MODEL`, for CPU or a small GPU).
Every datatrove task starts its own server (InferenceRunner does, per rank, on a port derived from the rank);
`gpus_per_task` (an executor option) gives each task's server its own GPUs, and vLLM's tensor parallelism
defaults to it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import threading

from datatrove.pipeline.inference.checkpointing import CheckpointManager
from datatrove.pipeline.inference.run_inference import InferenceConfig, InferenceRunner
from datatrove.pipeline.inference.servers import CustomServer, InferenceServer
from datatrove.pipeline.inference.servers.base import ServerError

from curate.errors import CurateError
from curate.pipelines.llm.options import (
    DEFAULT_CONCURRENCY,
    DEFAULT_START_RETRIES,
    DEFAULT_START_TIMEOUT,
    ServerOptions,
)
from curate.pipelines.vllm_serve import CurateVLLMServer, check_vllm, executable_path, reasoning_flags

API_KEY_VARIABLES = ("CURATE_API_KEY", "OPENAI_API_KEY")


class ModelServerError(CurateError, RuntimeError):
    """The job's model server did not start, did not answer, or went away (datatrove's ServerError)."""


def server_failure(config: InferenceConfig, error: BaseException) -> str:
    """One line on why a job's server failed and where to look, from the job's InferenceConfig."""
    attempts = config.server_start_max_retries + 1
    waited = f"{config.server_start_timeout_sec:g} s per attempt, {attempts} attempt{'s' if attempts > 1 else ''}"
    if config.server_type == "endpoint":
        where = f"the endpoint {config.endpoint_url} ({config.model_name_or_path}) did not answer ({waited})"
        fix = "check --endpoint-url and that the server is up"
    else:
        where = f"the {config.server_type} server for {config.model_name_or_path} did not start or answer ({waited})"
        fix = f"its log is under {config.server_log_folder}"
    return f"{where}: {error}; {fix}, then rerun the same command to resume"


def inference_config(server: ServerOptions, log_folder: str, gpus_per_task: int = 0, *, context_tokens: int,
                     **job) -> InferenceConfig:
    """datatrove's InferenceConfig for `server`. context_tokens: what one request of the job needs (prompt and
    answer), the server's context unless `max_model_len` is set. job: the job's own InferenceConfig fields
    (rollouts_per_document, use_chat, default_generation_params, ...)."""
    model_kwargs = dict(server.server_args)
    if server.backend == "transformers" and "device" not in model_kwargs:
        model_kwargs["device"] = server.device
    if server.backend == "vllm" and server.reasoning_parser:
        model_kwargs.update(reasoning_flags(server.reasoning_parser, check_vllm()[1]))
    timeout = server.server_start_timeout or DEFAULT_START_TIMEOUT[server.backend]
    ready_delay = 0.5 if server.backend == "transformers" else 5.0
    retries = server.server_start_retries
    return InferenceConfig(
        server_type=server.backend,
        model_name_or_path=server.model,
        model_max_context=server.max_model_len or context_tokens,
        endpoint_url=server.endpoint_url,
        tp=server.tensor_parallel(gpus_per_task),
        dp=server.dp,
        max_concurrent_generations=server.concurrency or DEFAULT_CONCURRENCY[server.backend],
        request_timeout=server.request_timeout,
        model_kwargs=model_kwargs or None,
        server_log_folder=log_folder,
        metric_interval=60,
        server_start_timeout_sec=timeout,
        server_ready_delay_sec=ready_delay,
        server_ready_max_attempts=max(1, int(timeout / ready_delay)),
        server_start_max_retries=DEFAULT_START_RETRIES[server.backend] if retries is None else retries,
        **job,
    )


class TransformersServer(CustomServer):
    """`transformers serve MODEL` as a local OpenAI-compatible server; CustomServer's log-watching
    health monitor applies unchanged, only the command differs."""

    def __init__(self, config: InferenceConfig, rank: int):
        InferenceServer.__init__(self, config, rank)

    async def start_server(self) -> asyncio.subprocess.Process:
        options = dict(self.config.model_kwargs or {})
        cmd = [
            shutil.which("transformers", path=executable_path()) or "transformers",
            "serve", self.config.model_name_or_path,
            "--host", "127.0.0.1", "--port", str(self._port), "--log-level", "info",
        ]
        for key, value in options.items():
            cmd += [f"--{key}"] if value is True else [f"--no-{key}"] if value is False else [f"--{key}", str(value)]
        return await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    def get_base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"


class DurableCheckpointManager(CheckpointManager):
    """datatrove's CheckpointManager, recording a finished chunk before forgetting how to replay it.

    datatrove, once a chunk's output file is final, deletes the chunk's local checkpoint, drops its cached
    requests (an await on SQLite) and only then truncates and rewrites last_chunk/RANK.txt. A kill in between
    left a chunk whose output was final but that the rerun did not know was finished and could not replay: it
    asked the model again for every document of it (and rewrote the file). A kill between the truncation and
    the write left an empty marker the rerun cannot parse. Here the marker is replaced atomically first; a kill
    after it leaves only the chunk's checkpoint and cache entries, which a rerun skips (parse_existing_checkpoints
    ignores chunks up to the marker) and the run's successful end deletes."""

    async def update_last_chunk_index(self, rank: int) -> None:
        async with self.checkpoint_file_lock:
            # Chunks can finish out of order: advance over every finished one that follows the marker.
            while self.last_chunk_index + 1 in self.new_completed_chunks:
                chunk_index = self.last_chunk_index + 1
                self.record_last_chunk(rank, chunk_index)
                self.last_chunk_index = chunk_index
                async with self.file_locks[chunk_index]:
                    chunk_file = os.path.join(self.checkpoints_local_dir, f"{rank:05d}/chunk_{chunk_index:05d}.jsonl")
                    if os.path.exists(chunk_file):
                        os.remove(chunk_file)
                self.file_locks.pop(chunk_index)
                self.per_chunk_counts.pop(chunk_index)
                self.new_completed_chunks.remove(chunk_index)
                if self.request_cache is not None:
                    await self.request_cache.drop_chunk(chunk_index)

    def record_last_chunk(self, rank: int, chunk_index: int) -> None:
        """last_chunk/RANK.txt (the file datatrove reads on resume) holds `chunk_index`, or its old value if
        killed while writing: never an empty or half-written file."""
        path = os.path.join(self.checkpoints_local_dir, "last_chunk", f"{rank:05d}.txt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = path + ".tmp"  # not .partial: that suffix marks an unfinished output file in curate
        with open(temporary, "w") as f:
            f.write(str(chunk_index))
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)


class CurateInferenceRunner(InferenceRunner):
    """InferenceRunner plus the `transformers` server, a per-request timeout for local servers, bounded
    retries on HTTP 500, an API key read from the environment inside the worker (so it is never
    part of the pipeline description datatrove writes to executor.json), and checkpoints that a kill
    at any moment leaves resumable without asking the model again for a finished chunk."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        datatrove_manager = self.checkpoint_manager
        self.checkpoint_manager = DurableCheckpointManager(
            datatrove_manager.checkpoints_local_dir, datatrove_manager.records_per_chunk, request_cache=self.request_cache)

    def _init_server(self, rank: int) -> InferenceServer:
        if self.config.server_type == "endpoint" and self.config.api_key is None:
            self.config.api_key = next((os.environ[v] for v in API_KEY_VARIABLES if os.environ.get(v)), None)
        if self.config.server_type == "transformers":
            server = TransformersServer(self.config, rank)
        elif self.config.server_type == "vllm":
            server = CurateVLLMServer(self.config, rank)
        else:
            server = super()._init_server(rank)
        make_request, timeout = server._make_request, self.config.request_timeout

        async def bounded_request(payload: dict) -> dict:
            try:
                return await asyncio.wait_for(make_request(payload), timeout=timeout)
            except ServerError as error:
                # datatrove treats a 500 as fatal; a server that answered is alive, so this becomes a
                # ConnectionError that _send_request retries (6 attempts, exponential backoff).
                raise ConnectionError(str(error)) from error

        server._make_request = bounded_request
        return server

    async def run_async(self, data_gen, rank: int = 0) -> None:
        """datatrove's run_async, stopped on SIGTERM the way asyncio.run stops on Ctrl-C: the job is cancelled and
        unwinds in order (requests, then the request cache, then the server), and KeyboardInterrupt is raised after.

        The CLI turns SIGTERM into KeyboardInterrupt raised wherever the main thread is. Raised inside the event
        loop, it skips the job's own cleanup: asyncio.run then cancels every task at once, the request cache's
        writer task among them, so the cache never closes its SQLite connection, whose worker thread is not a
        daemon, and the process printed its error and then waited on that thread forever. Only where SIGTERM
        already raises KeyboardInterrupt (the CLI's main thread) is it taken over: a forked task worker keeps
        the default action, which the local pool relies on to stop it."""
        previous = signal.getsignal(signal.SIGTERM)
        if threading.current_thread() is not threading.main_thread() or previous is not signal.default_int_handler:
            return await super().run_async(data_gen, rank)
        loop, job, interrupted = asyncio.get_running_loop(), asyncio.current_task(), []

        def on_terminate() -> None:
            if not interrupted:  # once: a second cancel would cut the cleanup short and leave the cache open
                interrupted.append(True)
                job.cancel()

        loop.add_signal_handler(signal.SIGTERM, on_terminate)
        try:
            await super().run_async(data_gen, rank)
        except asyncio.CancelledError:
            if interrupted:
                raise KeyboardInterrupt from None
            raise
        finally:
            loop.remove_signal_handler(signal.SIGTERM)  # resets SIG_DFL: put the CLI's handler back
            signal.signal(signal.SIGTERM, previous)
