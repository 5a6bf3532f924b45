"""A kill at any moment of closing a chunk must leave a run that resumes without asking the model again for a
finished chunk. CI caught datatrove's order (delete the chunk's checkpoint, drop its cached requests, then write
the marker) re-requesting a whole finished chunk after a kill; DurableCheckpointManager writes the marker first."""

from __future__ import annotations

import asyncio
import json

import pytest
from datatrove.pipeline.inference.checkpointing import CheckpointManager

from curate.pipelines.llm.server import CurateInferenceRunner, DurableCheckpointManager

RECORDS_PER_CHUNK = 2


class Killed(BaseException):
    """The process dies here (SIGKILL runs no cleanup, so nothing after this point may happen)."""


class RequestCacheKilledWhileDropping:
    """The request cache's drop_chunk awaits SQLite; the kill lands there."""

    async def drop_chunk(self, chunk_index: int) -> None:
        raise Killed


class RecordingRequestCache:
    def __init__(self):
        self.dropped = []

    async def drop_chunk(self, chunk_index: int) -> None:
        self.dropped.append(chunk_index)


def _finish_chunks(manager: CheckpointManager, directory, chunks: list[int]) -> None:
    """The state write_document leaves when each chunk in `chunks` has all its documents (in that order)."""
    (directory / "00000").mkdir(parents=True, exist_ok=True)
    for chunk in chunks:
        lines = [json.dumps({"id": f"doc-{chunk}-{i}", "text": "t", "metadata": {}}) for i in range(RECORDS_PER_CHUNK)]
        (directory / "00000" / f"chunk_{chunk:05d}.jsonl").write_text("\n".join(lines) + "\n")
        manager.per_chunk_counts[chunk] = RECORDS_PER_CHUNK
        manager.new_completed_chunks.add(chunk)


def _resume_point(directory) -> tuple[int, set[str]]:
    """What a rerun's manager skips: documents of chunks known finished, and ids it replays from checkpoints."""
    return asyncio.run(CheckpointManager(str(directory), RECORDS_PER_CHUNK).parse_existing_checkpoints(0, None))


@pytest.mark.parametrize("manager_class", [CheckpointManager, DurableCheckpointManager])
def test_a_kill_while_the_cache_drops_a_finished_chunk(manager_class, tmp_path):
    manager = manager_class(str(tmp_path), RECORDS_PER_CHUNK, request_cache=RequestCacheKilledWhileDropping())
    _finish_chunks(manager, tmp_path, [0])
    with pytest.raises(Killed):
        asyncio.run(manager.update_last_chunk_index(0))
    skipped, replayed = _resume_point(tmp_path)
    if manager_class is CheckpointManager:
        # datatrove's own order: the chunk is neither recorded nor replayable, so its documents are sent again.
        # If this starts to fail, datatrove fixed the order and DurableCheckpointManager can go.
        assert (skipped, replayed) == (0, set())
    else:
        assert (skipped, replayed) == (RECORDS_PER_CHUNK, set())
        assert (tmp_path / "last_chunk" / "00000.txt").read_text() == "0"


def test_chunks_finished_out_of_order_are_recorded_in_order(tmp_path):
    cache = RecordingRequestCache()
    manager = DurableCheckpointManager(str(tmp_path), RECORDS_PER_CHUNK, request_cache=cache)
    _finish_chunks(manager, tmp_path, [1])
    asyncio.run(manager.update_last_chunk_index(0))
    # Chunk 0 is still open: chunk 1 must wait, or a rerun would skip chunk 0's unfinished documents.
    assert not (tmp_path / "last_chunk" / "00000.txt").exists() and cache.dropped == []
    _finish_chunks(manager, tmp_path, [0])
    asyncio.run(manager.update_last_chunk_index(0))
    assert (tmp_path / "last_chunk" / "00000.txt").read_text() == "1"
    assert cache.dropped == [0, 1] and manager.last_chunk_index == 1
    assert not list((tmp_path / "00000").glob("chunk_*.jsonl"))
    assert not list((tmp_path / "last_chunk").glob("*.tmp"))
    assert _resume_point(tmp_path) == (2 * RECORDS_PER_CHUNK, set())


def test_the_runner_checkpoints_with_the_durable_manager(tmp_path):
    from datatrove.pipeline.writers import JsonlWriter

    async def rollout(document, generate):
        return None

    runner = CurateInferenceRunner(
        rollout_fn=rollout,
        config=None,
        output_writer=JsonlWriter(str(tmp_path / "out"), output_filename="${rank}_${chunk_index}.jsonl"),
        checkpoints_local_dir=str(tmp_path / "checkpoints"),
        records_per_chunk=7,
    )
    manager = runner.checkpoint_manager
    assert isinstance(manager, DurableCheckpointManager)
    assert manager.records_per_chunk == 7 and manager.checkpoints_local_dir == str(tmp_path / "checkpoints")
    assert manager.request_cache is runner.request_cache
