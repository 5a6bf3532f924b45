"""curate overrides or wraps a few private datatrove methods; an upgrade that renames or reshapes one of them
would otherwise change behavior silently (the known trap: InferenceRunner writing nothing and exiting 0).
pyproject.toml bounds datatrove to the versions these hooks were checked against; this test fails loudly in
CI when an installed datatrove no longer has them with the signature curate relies on."""

from __future__ import annotations

import inspect

import pytest
from datatrove.executor import slurm
from datatrove.executor.base import PipelineExecutor
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.inference.checkpointing import CheckpointManager
from datatrove.pipeline.inference.run_inference import InferenceRunner
from datatrove.pipeline.inference.servers import VLLMServer
from datatrove.pipeline.inference.servers.base import InferenceServer
from datatrove.pipeline.inference.servers.compile_lock import CompileLockManager
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.writers.disk_base import DiskWriter

HOOKS = [
    # (owner, name, parameters curate passes or receives, who overrides it)
    (PipelineExecutor, "_run_for_rank", ["self", "rank", "local_rank", "node_rank"],
     "pipelines.executors.GpuSlotExecutor"),
    (LocalPipelineExecutor, "_run_for_rank", ["self", "rank", "local_rank", "node_rank"],
     "pipelines.executors.GpuSlotExecutor"),
    (DiskWriter, "_get_output_filename", ["self", "document", "rank", "kwargs"], "pipelines.steps.AtomicOutput"),
    (DiskWriter, "close_file", ["self", "filename"], "pipelines.steps.AtomicOutput"),
    (InferenceRunner, "_init_server", ["self", "rank"], "pipelines.llm_tag.CurateInferenceRunner"),
    (InferenceServer, "_make_request", ["self", "payload"], "pipelines.llm_tag.CurateInferenceRunner"),
    (CheckpointManager, "update_last_chunk_index", ["self", "rank"], "pipelines.llm.server.DurableCheckpointManager"),
    (InferenceServer, "bg_start_server", ["self"], "pipelines.vllm_serve.CurateVLLMServer (polls the compile lock first)"),
    (VLLMServer, "start_server", ["self"], "pipelines.vllm_serve.CurateVLLMServer"),
    (VLLMServer, "_start_vllm_task", ["self"], "pipelines.vllm_serve.CurateVLLMServer (PATH for the executable)"),
    (VLLMServer, "_get_compile_lock", ["self"], "pipelines.vllm_serve.CurateVLLMServer (PollingCompileLock)"),
    (CompileLockManager, "__init__", ["self", "config_hash", "lock_dir"], "pipelines.vllm_serve.PollingCompileLock"),
    (PipelineStep, "__new__", ["cls", "args", "kwargs"], "pipelines.installed.InstalledWithCurate (skips the dependency scan)"),
    (slurm, "launch_slurm_job", ["launch_file_contents", "job_id_retriever", "args"], "pipelines.executors (--slurm-dry-run replaces the sbatch call)"),
    (slurm.SlurmPipelineExecutor, "launch_job", ["self"], "pipelines.executors (submits a chain)"),
]


@pytest.mark.parametrize(("owner", "name", "parameters", "user"), HOOKS,
                         ids=[f"{getattr(o, '__name__', o)}.{n}" for o, n, _, _ in HOOKS])
def test_private_datatrove_hook_exists_with_expected_signature(owner, name, parameters, user):
    hook = getattr(owner, name, None)
    assert callable(hook), f"datatrove no longer has {owner.__name__}.{name}, which {user} overrides"
    assert list(inspect.signature(hook).parameters) == parameters, (
        f"{owner.__name__}.{name} changed its signature; check {user} before widening datatrove's range")


def test_writers_keep_the_open_file_manager_atomic_output_publishes_from():
    # AtomicOutput.close() asks the writer's output manager which files are still open, then publishes them.
    from datatrove.io import OutputFileManager

    assert callable(getattr(OutputFileManager, "get_open_files", None))
    assert "output_mg" in inspect.getsource(DiskWriter.__init__)


def test_compile_lock_keeps_the_state_the_polling_lock_takes_over(tmp_path):
    # PollingCompileLock sets _lock_file itself and relies on release(), mark_complete() and cache_exists().
    lock = CompileLockManager("abc", lock_dir=tmp_path)
    assert lock._lock_file is None and lock.lock_path.parent == tmp_path and lock.marker_path.suffix == ".done"
    assert lock.acquire() is True and lock._lock_file is not None
    lock.mark_complete()
    lock.release()
    assert lock._lock_file is None and lock.cache_exists()
    # VLLMServer's own start takes the lock through _get_compile_lock().acquire(), and execs a bare "vllm"
    # with a copy of os.environ: what CurateVLLMServer's overrides depend on.
    assert "self._get_compile_lock().acquire()" in inspect.getsource(VLLMServer.start_server)
    source = inspect.getsource(VLLMServer._start_vllm_task)
    assert '"vllm",' in source and "os.environ.copy()" in source
    assert "check_required_dependencies" in inspect.getsource(VLLMServer.__init__)


def test_checkpoint_manager_keeps_the_state_the_durable_manager_rewrites(tmp_path):
    # DurableCheckpointManager re-implements update_last_chunk_index over these attributes and files; the
    # runner builds its manager in __init__ and uses it through self.checkpoint_manager only.
    manager = CheckpointManager(str(tmp_path), 3)
    for attribute in ("file_locks", "checkpoint_file_lock", "per_chunk_counts", "new_completed_chunks",
                      "last_chunk_index", "checkpoints_local_dir", "records_per_chunk", "request_cache"):
        assert hasattr(manager, attribute), attribute
    source = inspect.getsource(CheckpointManager)
    assert 'f"last_chunk/{rank:05d}.txt"' in source and 'f"{rank:05d}/chunk_{chunk_index:05d}.jsonl"' in source
    assert "self.checkpoint_manager = CheckpointManager(" in inspect.getsource(InferenceRunner.__init__)
