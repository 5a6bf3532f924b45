"""The exports of a built set: CPT text (parquet and jsonl), SFT rows where the set has completions, and the
token-packed sequences a trainer reads (parquet or a flat memmap)."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curate.builders.cpt.common import CPTError, load_tokenizer
from curate.files import atomic_path, write_text_atomic
from curate.handoff.export import input_files, run_export


@dataclass
class PackResult:
    output: Path
    format: str
    documents: int
    tokens: int
    sequences: int
    pack_length: int


def pack_dataset(dataset: Path, output: Path, tokenizer_name: str, pack_length: int = 4096, fmt: str = "parquet",
                 batch_size: int = 256) -> PackResult:
    """Tokenizes `text`, appends EOS to each document and concatenates everything into sequences of pack_length.

    parquet: data/train-00000.parquet, `input_ids` (pack_length ids; the last sequence may be shorter).
    memmap:  tokens.bin, a flat array of ids (reshape to (-1, pack_length) for full sequences).
    Both: index.parquet (id, start: offset of the document's first token in the flat stream, n_tokens incl. EOS)
    and meta.json (dtype, tokenizer, eos id, totals)."""
    if fmt not in ("parquet", "memmap"):
        raise CPTError("--pack-format must be parquet or memmap")
    if pack_length < 2:
        raise CPTError("--pack-length must be at least 2")
    tokenizer = load_tokenizer(tokenizer_name)
    eos = tokenizer.eos_token_id
    if eos is None:
        raise CPTError(f"the tokenizer {tokenizer_name!r} has no EOS token to separate packed documents")
    dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.uint32
    shutil.rmtree(output, ignore_errors=True)
    (output / "data").mkdir(parents=True)
    index_schema = pa.schema([("id", pa.string()), ("start", pa.int64()), ("n_tokens", pa.int64())])
    sequence_schema = pa.schema([("input_ids", pa.list_(pa.int32())), ("length", pa.int32())])
    index_path, flat_path = output / "index.parquet", output / "tokens.bin"
    data_path = output / "data" / "train-00000.parquet"
    buffer = np.empty(0, dtype=np.int64)
    offset = documents = sequences = 0

    def flush_sequences(writer, final: bool) -> None:
        nonlocal buffer, sequences
        full = len(buffer) // pack_length * pack_length
        end = len(buffer) if final else full
        if end:
            chunks = [buffer[i: i + pack_length] for i in range(0, end, pack_length)]
            writer.write_table(pa.table({"input_ids": [c.astype(np.int32) for c in chunks],
                                         "length": [len(c) for c in chunks]}, schema=sequence_schema))
            sequences += len(chunks)
            buffer = buffer[end:]

    # Each file renamed once it is closed: the sequences first, then the index, then meta.json.
    sink_path = data_path if fmt == "parquet" else flat_path
    with atomic_path(index_path) as index_staged, atomic_path(sink_path) as sink_staged, \
            pq.ParquetWriter(index_staged, index_schema) as index, \
            (pq.ParquetWriter(sink_staged, sequence_schema) if fmt == "parquet" else open(sink_staged, "wb")) as sink:
        for _, path in input_files(dataset):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=["id", "text"]):
                ids, texts = batch.column("id").to_pylist(), batch.column("text").to_pylist()
                encoded = [e + [eos] for e in tokenizer(texts, add_special_tokens=False)["input_ids"]]
                lengths = [len(e) for e in encoded]
                starts = offset + np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
                index.write_table(pa.table({"id": ids, "start": starts, "n_tokens": lengths}, schema=index_schema))
                flat = np.fromiter((t for e in encoded for t in e), dtype=np.int64, count=sum(lengths))
                offset += int(flat.size)
                documents += len(encoded)
                if fmt == "parquet":
                    buffer = np.concatenate([buffer, flat])
                    flush_sequences(sink, final=False)
                else:
                    sink.write(flat.astype(dtype).tobytes())
        if fmt == "parquet":
            flush_sequences(sink, final=True)
    if fmt == "memmap":
        sequences = math.ceil(offset / pack_length)
        shutil.rmtree(output / "data")
    meta = {"format": fmt, "pack_length": pack_length, "tokenizer": tokenizer_name, "eos_token_id": eos,
            "dtype": np.dtype(dtype).name if fmt == "memmap" else "int32", "documents": documents, "tokens": offset,
            "sequences": sequences, "source": str(dataset)}
    write_text_atomic(output / "meta.json", json.dumps(meta, indent=2))
    return PackResult(output=output, format=fmt, documents=documents, tokens=offset, sequences=sequences,
                      pack_length=pack_length)


def load_packed_tokens(packed: Path) -> np.ndarray:
    """The flat token stream of a packed export (either format), for trainers and round-trip checks."""
    meta = json.loads((packed / "meta.json").read_text())
    if meta["format"] == "memmap":
        return np.memmap(packed / "tokens.bin", dtype=meta["dtype"], mode="r")
    table = pq.read_table(packed / "data", columns=["input_ids"])
    return np.concatenate([np.asarray(x, dtype=np.int64) for x in table.column("input_ids").to_pylist()]) \
        if table.num_rows else np.empty(0, dtype=np.int64)


def export_dataset(dataset: Path, exports: Path, tokenizer: str, pack_length: int, pack_format: str,
                   progress: bool = True) -> dict:
    """CPT text (parquet via the shared export module, plus jsonl), SFT where the rows have a completion, packing."""
    done: dict = {}
    cpt = run_export(dataset, "cpt", exports / "cpt", progress=progress)
    done["cpt"] = sum(cpt.rows.values())
    jsonl = exports / "cpt_jsonl" / "train-00000.jsonl"
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect() as connection, atomic_path(jsonl) as staged:
        connection.execute(f"COPY (SELECT text, id FROM read_parquet('{exports / 'cpt' / 'data'}/*.parquet')) "
                           f"TO '{staged}' (FORMAT json)")
    if "completion" in pq.read_schema(next(iter(sorted((dataset / "data").glob("*.parquet"))))).names:
        sft = run_export(dataset, "sft", exports / "sft", instruction="", progress=progress)
        done["sft"] = sum(sft.rows.values())
    packed = pack_dataset(dataset, exports / "packed", tokenizer, pack_length, pack_format)
    done["packed"] = {"sequences": packed.sequences, "tokens": packed.tokens, "format": packed.format}
    return done
