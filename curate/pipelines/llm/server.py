"""Server options shared by every job that calls a model (tagging, CPT rewrite, pass-rate sampling, the LLM
writers, the judges), and the one translation of them into datatrove's InferenceConfig.

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
from dataclasses import dataclass, field, fields

from datatrove.pipeline.inference.run_inference import InferenceConfig, InferenceRunner
from datatrove.pipeline.inference.servers import CustomServer, InferenceServer
from datatrove.pipeline.inference.servers.base import ServerError

from curate.errors import CurateError
from curate.pipelines.vllm_serve import CurateVLLMServer, VLLMSetupError, check_vllm, executable_path, reasoning_flags

BACKENDS = ("vllm", "endpoint", "transformers")
API_KEY_VARIABLES = ("CURATE_API_KEY", "OPENAI_API_KEY")
DEFAULT_CONCURRENCY = {"vllm": 256, "endpoint": 32, "transformers": 4}
# One start attempt: spawning the server (on a retry, waiting for another task's first start) and then until it
# answers. A real model's first vLLM start (weights from a network disk, torch.compile, CUDA graphs) takes minutes.
DEFAULT_START_TIMEOUT = {"vllm": 1800.0, "endpoint": 300.0, "transformers": 600.0}
DEFAULT_START_RETRIES = {"vllm": 2, "endpoint": 1, "transformers": 1}


class ServerConfigError(CurateError, ValueError):
    pass


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


@dataclass(frozen=True)
class ServerOptions:
    """Which model, on which server, started how. A job's options extend this class with the job's own settings
    (sampling, prompts, budgets), so that every job validates and configures its server the same way."""

    model: str
    backend: str = "transformers"
    endpoint_url: str | None = None
    tp: int | None = None  # None: the GPUs per task for vllm, else 1
    dp: int = 1
    server_args: dict = field(default_factory=dict)  # extra server flags, KEY -> VALUE (True: a bare flag)
    concurrency: int | None = None  # requests in flight; None: DEFAULT_CONCURRENCY of the backend
    request_timeout: float = 600.0
    device: str = "auto"  # transformers backend only
    chat_template_kwargs: dict | None = None  # None: the model family's default (Qwen3: thinking off), else {}
    reasoning_parser: str | None = None  # vllm only: the server splits <think> off into `reasoning`
    server_start_timeout: float | None = None  # seconds per start attempt; None: DEFAULT_START_TIMEOUT
    server_start_retries: int | None = None  # None: DEFAULT_START_RETRIES
    max_model_len: int | None = None  # the server's context; None: what one request of the job needs

    @property
    def server(self) -> ServerOptions:
        """The server part alone (a job's options are ServerOptions plus their own settings)."""
        return ServerOptions(**{f.name: getattr(self, f.name) for f in fields(ServerOptions)})

    def tensor_parallel(self, gpus_per_task: int = 0) -> int:
        if self.tp is not None:
            return self.tp
        return gpus_per_task if self.backend == "vllm" and gpus_per_task else 1

    def validate(self, gpus_per_task: int = 0) -> None:
        if not self.model:
            raise ServerConfigError("--model is required (a hub name or a local directory)")
        if self.backend not in BACKENDS:
            raise ServerConfigError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.backend == "endpoint" and not self.endpoint_url:
            raise ServerConfigError("--backend endpoint needs --endpoint-url (an OpenAI-compatible base URL ending in /v1)")
        if self.backend != "endpoint" and self.endpoint_url:
            raise ServerConfigError("--endpoint-url only applies to --backend endpoint")
        if self.backend == "transformers" and shutil.which("transformers", path=executable_path()) is None:
            raise ServerConfigError("--backend transformers needs `transformers serve`: pip install 'curate[serve]'")
        if self.backend == "endpoint" and gpus_per_task:
            raise ServerConfigError("--gpus-per-task applies to servers this job starts (vllm, transformers); "
                                    "an endpoint's GPUs are its own")
        parallel = self.tensor_parallel(gpus_per_task) * self.dp
        if self.backend == "vllm" and gpus_per_task and parallel != gpus_per_task:
            raise ServerConfigError(
                f"--tp {self.tensor_parallel(gpus_per_task)} x --dp {self.dp} = {parallel} GPUs per server, but each task "
                f"gets --gpus-per-task {gpus_per_task}; make them equal (--tp defaults to --gpus-per-task)"
            )
        if self.reasoning_parser and self.backend != "vllm":
            raise ServerConfigError("--reasoning-parser is a flag of `vllm serve`; it applies to --backend vllm only")
        if self.backend == "vllm":
            try:
                _, version = check_vllm()
                if self.reasoning_parser:
                    reasoning_flags(self.reasoning_parser, version)
            except VLLMSetupError as error:
                raise ServerConfigError(str(error)) from None


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


class CurateInferenceRunner(InferenceRunner):
    """InferenceRunner plus the `transformers` server, a per-request timeout for local servers, bounded
    retries on HTTP 500 and an API key read from the environment inside the worker (so it is never
    part of the pipeline description datatrove writes to executor.json)."""

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
