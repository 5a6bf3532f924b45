"""Publishing a built dataset to the Hugging Face Hub.

A dataset directory is checked before anything leaves the machine: the card must parse with
`huggingface_hub.DatasetCard` and carry the metadata the Hub needs (license, task_categories,
size_categories, configs), every config's data files must exist and load with `datasets`, and the
declared size category must match the rows actually there. Only what the card describes is uploaded
(the data files, the card, the images it shows, and the rejects); bookkeeping (`.curate/`) and tag
shards stay local. The upload is one Hub commit, so a failure leaves the remote repo as it was; it
never writes to the local directory except the `.curate/published.json` record after a success.

The token comes from `HF_TOKEN` and is never printed, logged, or passed as a parameter.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import pyarrow.parquet as pq

from curate.data_cards.cards import size_category
from curate.errors import CurateError, InputError
from curate.files import PARTIAL, write_text_atomic
from curate.handoff.jobs import PublishJob
from curate.pipelines.state import STATE

README = "README.md"
PUBLISHED = "published.json"
REQUIRED_METADATA = ("license", "task_categories", "size_categories", "configs")
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
# Markdown image links in the card (`![alt](path)`) and HTML <img src="path">.
IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)|<img[^>]+src=[\"']([^\"']+)[\"']")
SIZE_CATEGORIES = ("n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M", "100M<n<1B", "1B<n<10B",
                   "10B<n<100B", "100B<n<1T", "n>1T")


class InvalidDatasetError(CurateError, ValueError):
    """The directory is not a publishable dataset; `problems` lists every reason, not just the first."""

    def __init__(self, directory: Path, problems: list[str]):
        self.problems = problems
        super().__init__(f"{directory} cannot be published:\n" + "\n".join(f"  - {p}" for p in problems))


class RepoIdError(CurateError, ValueError):
    """The Hub repo is not named ORG/NAME."""


class UploadError(CurateError, RuntimeError):
    """The upload did not happen. `transient` says whether trying again later may succeed."""

    def __init__(self, message: str, transient: bool = False):
        self.transient = transient
        super().__init__(message)


def _is_transient(error: Exception) -> bool:
    """Network failures, timeouts, rate limits and server errors pass; a refused token or a bad request does not."""
    from huggingface_hub.errors import OfflineModeIsEnabled

    if isinstance(error, OfflineModeIsEnabled):  # HF_HUB_OFFLINE is set: waiting will not help
        return False
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    if status is None:
        # huggingface_hub's HTTP client (httpx, or requests in older versions) names its network errors so.
        return isinstance(error, OSError) or any(
            kind.__name__ in ("TransportError", "TimeoutException") for kind in type(error).__mro__
        )
    return status in (408, 429) or status >= 500


@dataclass
class UploadFile:
    path_in_repo: str
    size: int


@dataclass
class PublishPlan:
    directory: Path
    files: list[UploadFile]
    rows: dict[str, dict[str, int]]  # config -> split -> rows
    metadata: dict

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class PublishResult:
    repo_id: str
    private: bool
    dry_run: bool
    plan: PublishPlan
    commit_url: str | None = None
    deleted: list[str] = field(default_factory=list)


def _config_patterns(config: dict) -> dict[str, list[str]]:
    """split -> patterns, from any of the forms the Hub accepts for `data_files`."""
    data_files = config.get("data_files")
    if isinstance(data_files, str):
        return {"train": [data_files]}
    if isinstance(data_files, list) and all(isinstance(item, str) for item in data_files):
        return {"train": list(data_files)}
    if isinstance(data_files, list):
        splits: dict[str, list[str]] = {}
        for item in data_files:
            if not isinstance(item, dict) or "path" not in item:
                raise InputError(f"data_files entry {item!r} has no 'path'")
            paths = item["path"] if isinstance(item["path"], list) else [item["path"]]
            splits.setdefault(item.get("split", "train"), []).extend(paths)
        return splits
    raise InputError(f"data_files is {data_files!r}; expected a path, a list of paths, or a list of {{split, path}}")


def _match(directory: Path, pattern: str) -> list[Path]:
    pure = PurePosixPath(pattern)
    if pure.is_absolute() or ".." in pure.parts:
        raise InputError(f"data_files pattern {pattern!r} points outside the dataset directory")
    return sorted(p for p in directory.glob(pattern) if p.is_file())


def _rows(directory: Path, files: list[Path], problems: list[str]) -> int | None:
    """Rows from the parquet footers (no data read); None for other formats, counted when loaded."""
    if not all(f.suffix == ".parquet" for f in files):
        return None
    total = 0
    for f in files:
        try:
            total += pq.ParquetFile(f).metadata.num_rows
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            problems.append(f"{_relative(directory, f)} is not a readable parquet file: {error}")
    return total


def _relative(directory: Path, path: Path) -> str:
    return path.relative_to(directory).as_posix()


def validate_dataset(directory: str | Path, include_rejects: bool = True) -> PublishPlan:
    """Checks a dataset directory the way the Hub and `datasets` will read it; returns what would be uploaded."""
    from huggingface_hub import DatasetCard

    directory = Path(directory)
    if not directory.is_dir():
        raise InvalidDatasetError(directory, [f"{directory} is not a directory"])
    card_path = directory / README
    if not card_path.is_file():
        raise InvalidDatasetError(directory, [f"no dataset card: {card_path} is missing (build the dataset with curate)"])
    try:
        card = DatasetCard.load(card_path)
    except Exception as error:  # huggingface_hub raises ValueError or yaml errors for a malformed header
        raise InvalidDatasetError(directory, [f"{README} has invalid YAML metadata: {error}"]) from error
    metadata = card.data.to_dict()
    problems = [f"card metadata has no {key!r}" for key in REQUIRED_METADATA if not metadata.get(key)]
    for key in ("task_categories", "size_categories"):
        if metadata.get(key) and not isinstance(metadata[key], list):
            problems.append(f"card metadata {key!r} must be a list, not {metadata[key]!r}")
    unknown = [c for c in metadata.get("size_categories") or [] if c not in SIZE_CATEGORIES]
    if unknown:
        problems.append(f"unknown size_categories {unknown}; use one of {', '.join(SIZE_CATEGORIES)}")

    upload: dict[str, Path] = {README: card_path}
    rows: dict[str, dict[str, int]] = {}
    configs = metadata.get("configs") or []
    if not isinstance(configs, list):
        problems.append(f"card metadata 'configs' must be a list, not {configs!r}")
        configs = []
    for config in configs:
        name = config.get("config_name", "default") if isinstance(config, dict) else None
        if name is None:
            problems.append(f"config {config!r} is not a mapping")
            continue
        try:
            splits = _config_patterns(config)
        except ValueError as error:
            problems.append(f"config {name!r}: {error}")
            continue
        rows[name] = {}
        for split, patterns in splits.items():
            matched: list[Path] = []
            for pattern in patterns:
                try:
                    found = _match(directory, pattern)
                except ValueError as error:
                    problems.append(f"config {name!r}, split {split!r}: {error}")
                    continue
                if not found:
                    problems.append(f"config {name!r}, split {split!r}: no file matches {pattern!r}")
                matched += found
            for path in matched:
                upload[_relative(directory, path)] = path
            count = _rows(directory, matched, problems) if matched else 0
            if count is not None:
                rows[name][split] = count
    if not problems:
        problems += _load_with_datasets(directory, rows)
    if rows and not problems and metadata.get("size_categories"):
        # The Hub's size category describes the default (first) config.
        total = sum(next(iter(rows.values())).values())
        if size_category(total) not in metadata["size_categories"]:
            problems.append(
                f"size_categories says {metadata['size_categories']} but the data has {total:,} rows ({size_category(total)})"
            )

    for groups in IMAGE_LINK.findall(card.text):
        link = groups[0] or groups[1]
        if re.match(r"^[a-z]+:", link) or link.startswith("/"):
            continue
        image = directory / link
        if not image.is_file():
            problems.append(f"the card shows {link!r}, which does not exist")
        else:
            upload[_relative(directory, image)] = image
    if include_rejects and (directory / "rejects").is_dir():
        for path in sorted((directory / "rejects").rglob("*")):
            if path.is_file() and path.stat().st_size > 0 and not path.name.endswith(PARTIAL):
                upload[_relative(directory, path)] = path
    if problems:
        raise InvalidDatasetError(directory, problems)
    files = [UploadFile(path_in_repo=key, size=path.stat().st_size) for key, path in sorted(upload.items())]
    return PublishPlan(directory=directory, files=files, rows=rows, metadata=metadata)


def _load_with_datasets(directory: Path, rows: dict[str, dict[str, int]]) -> list[str]:
    """Loads every config as the Hub's viewer and `load_dataset(repo_id)` will: from the card's configs.

    Streaming reads one row per split, so a large dataset is neither converted nor copied into the cache."""
    from datasets import load_dataset

    problems = []
    for name, splits in rows.items():
        try:
            loaded = load_dataset(str(directory), name=name, streaming=True)
        except Exception as error:  # noqa: BLE001 - unreadable files raise many types; all mean "not loadable"
            problems.append(f"config {name!r} does not load with datasets: {type(error).__name__}: {error}")
            continue
        for split in loaded:
            try:
                next(iter(loaded[split]), None)
            except Exception as error:  # noqa: BLE001 - as above, for the first row of each split
                problems.append(f"config {name!r}, split {split!r} cannot be read: {type(error).__name__}: {error}")
                continue
            if split not in splits:
                # Not parquet: count rows through datasets (smaller formats; builders write parquet).
                splits[split] = sum(1 for _ in loaded[split])
    return problems


def _token() -> str:
    token = os.environ.get("HF_TOKEN", "").strip()
    if not token:
        raise UploadError("HF_TOKEN is not set: export a Hugging Face write token as HF_TOKEN (it is never printed)")
    return token


def _redact(message: str, token: str) -> str:
    return message.replace(token, "***") if token else message


def check_publish(job: PublishJob) -> None:
    """A repo not named ORG/NAME fails here, before the dataset is read (the publish flow checks its parameters so)."""
    if not REPO_ID.match(job.repo_id):
        raise RepoIdError(f"--repo-id {job.repo_id!r} is not of the form ORG/NAME")


def publish(job: PublishJob) -> PublishResult:
    """Runs `curate publish` and the publish flow's push: validates the dataset, then (unless dry_run) uploads it as
    one commit to the dataset repo `repo_id`.

    Remote files under the folders being uploaded (data/, rejects/) that the new version does not have are
    deleted in the same commit, so a rebuilt dataset never mixes old shards into its splits."""
    check_publish(job)
    plan = validate_dataset(job.directory, include_rejects=job.include_rejects)
    result = PublishResult(repo_id=job.repo_id, private=job.private, dry_run=job.dry_run, plan=plan)
    if job.dry_run:
        return result

    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    token = _token()
    api = HfApi(endpoint=job.endpoint, token=token)
    uploading = {f.path_in_repo for f in plan.files}
    folders = {f.split("/", 1)[0] for f in uploading if "/" in f}
    try:
        api.create_repo(job.repo_id, repo_type="dataset", private=job.private, exist_ok=True)
        remote = api.list_repo_files(job.repo_id, repo_type="dataset")
        stale = sorted(f for f in remote if f.split("/", 1)[0] in folders and "/" in f and f not in uploading)
        operations = [CommitOperationAdd(path_in_repo=f.path_in_repo, path_or_fileobj=str(plan.directory / f.path_in_repo))
                      for f in plan.files]
        operations += [CommitOperationDelete(path_in_repo=f) for f in stale]
        info = api.create_commit(
            job.repo_id, operations, repo_type="dataset",
            commit_message=job.commit_message or f"curate publish: {len(plan.files)} files",
        )
    except Exception as error:  # noqa: BLE001 - network, HTTP and Hub errors all end the same way: nothing published
        raise UploadError(
            f"upload to {job.repo_id} at {api.endpoint} failed; nothing was changed locally. "
            f"{type(error).__name__}: {_redact(str(error), token)}",
            transient=_is_transient(error),
        ) from None
    result.commit_url = str(info.commit_url)
    result.deleted = stale
    _record(plan.directory, result, api.endpoint)
    return result


def _record(directory: Path, result: PublishResult, endpoint: str) -> None:
    record = {
        "repo_id": result.repo_id, "private": result.private, "endpoint": endpoint, "commit_url": result.commit_url,
        "published_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": [asdict(f) for f in result.plan.files], "deleted": result.deleted,
    }
    write_text_atomic(directory / STATE / PUBLISHED, json.dumps(record, indent=2))
