"""The run store: everything a run leaves on disk, readable without torch.

    <root>/<run id>/
        spec.json          what was asked: algorithm, data, every hyperparameter, seed, device
        federation.json    sites, sizes, features, classes, ground truth of injected shifts
        status.json        state, progress, heartbeat, pid, error text (rewritten atomically)
        rounds.jsonl       one JSON line per evaluated round, append-only
        arrays/r000010.npz per-round arrays (b_in, w_in, marks, similarity matrices, ...)
        summary.json       final per-site metrics, mean and worst site (written at the end)
        identity.json      what people call it: a number in its store, a name and tags (editable)
        model.npz          Flower runs: each site's final shared parameters, as the server holds them

Every whole-file write goes to a temporary file that is renamed into place, so a killed worker
leaves either the old or the new file. The append-only log may end in a torn line; readers
skip it. Arrays are npz read with `allow_pickle=False`: nothing here ever unpickles.
"""

from __future__ import annotations

import io
import json
import math
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from fedcore.errors import RunNotFound, SpecError

STATES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
NAME_LENGTH, TAG_LENGTH, MAX_TAGS = 80, 32, 12
FINISHED = frozenset({"done", "failed", "cancelled", "interrupted"})


def default_root() -> Path:
    """`$FEDCORE_STORE`, else `runs/` in the working directory (the repo root for make/app)."""
    return Path(os.environ.get("FEDCORE_STORE", "runs"))


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def json_safe(value: Any) -> Any:
    """Replace NaN / inf by None (strict JSON) and numpy scalars / arrays by Python values."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    text = json.dumps(json_safe(obj), indent=2, allow_nan=False)
    atomic_write_bytes(path, text.encode("utf-8"))


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default


class Run:
    """One run's folder. Writers: the engine / job worker. Readers: CLI, dashboard."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.id = self.path.name

    # -- whole-file parts ------------------------------------------------------------------
    @property
    def spec(self) -> dict[str, Any]:
        return read_json(self.path / "spec.json", {})

    @property
    def federation(self) -> dict[str, Any]:
        return read_json(self.path / "federation.json", {})

    def write_federation(self, description: Mapping[str, Any]) -> None:
        atomic_write_json(self.path / "federation.json", description)

    @property
    def summary(self) -> dict[str, Any] | None:
        return read_json(self.path / "summary.json")

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        atomic_write_json(self.path / "summary.json", summary)

    # -- status ----------------------------------------------------------------------------
    def raw_status(self) -> dict[str, Any]:
        return read_json(self.path / "status.json", {"state": "queued"})

    @property
    def status(self) -> dict[str, Any]:
        """The stored status, with 'running' turned into 'interrupted' when its worker is gone."""
        status = self.raw_status()
        if status.get("state") == "running" and not _worker_alive(status):
            status = {**status, "state": "interrupted", "stored_state": "running"}
            status.setdefault(
                "error", "The worker process stopped without finishing; the last state is kept."
            )
        return status

    def update_status(self, **fields: Any) -> dict[str, Any]:
        status = {**self.raw_status(), **fields, "updated": now_iso()}
        atomic_write_json(self.path / "status.json", status)
        return status

    def mark_started(self, total_rounds: int) -> None:
        self.update_status(
            state="running",
            started=now_iso(),
            started_at=time.time(),
            pid=os.getpid(),
            host=socket.gethostname(),
            round=0,
            total_rounds=total_rounds,
            heartbeat=time.time(),
        )

    def heartbeat(self, **fields: Any) -> None:
        self.update_status(heartbeat=time.time(), **fields)

    def mark_finished(self, state: str, error: str | None = None) -> None:
        if state not in FINISHED:
            raise ValueError(f"not a final state: {state}")
        self.update_status(state=state, finished=now_iso(), error=error, heartbeat=time.time())

    # -- per-round records -----------------------------------------------------------------
    def append_round(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(json_safe(record), allow_nan=False, separators=(",", ":"))
        with open(self.path / "rounds.jsonl", "a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def rounds(self) -> list[dict[str, Any]]:
        """All complete records; a torn last line from a killed writer is skipped."""
        try:
            text = (self.path / "rounds.jsonl").read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        records = []
        for line in text.splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return records

    def save_arrays(self, round_: int, arrays: Mapping[str, np.ndarray]) -> None:
        values = {k: np.asarray(v) for k, v in arrays.items()}
        objects = [k for k, v in values.items() if v.dtype == object]
        if objects:  # they would be pickled, and readers never unpickle
            raise ValueError(f"arrays {objects} hold Python objects; store numbers or booleans")
        buffer = io.BytesIO()
        np.savez(buffer, **values)
        atomic_write_bytes(self.path / "arrays" / f"r{round_:06d}.npz", buffer.getvalue())

    def array_rounds(self) -> list[int]:
        folder = self.path / "arrays"
        if not folder.is_dir():
            return []
        return sorted(int(p.stem[1:]) for p in folder.glob("r*.npz") if p.stem[1:].isdigit())

    def load_arrays(self, round_: int) -> dict[str, np.ndarray]:
        return _load_npz(self.path / "arrays" / f"r{round_:06d}.npz")

    def save_model(self, tensors: Mapping[str, np.ndarray]) -> None:
        """model.npz: the final shared parameters as the server holds them, [sites, ...] each (Flower runs)."""
        buffer = io.BytesIO()
        np.savez(buffer, **{k: np.asarray(v) for k, v in tensors.items()})
        atomic_write_bytes(self.path / "model.npz", buffer.getvalue())

    def load_model(self) -> dict[str, np.ndarray]:
        return _load_npz(self.path / "model.npz")

    # -- identity: what people call the run --------------------------------------------------
    @property
    def identity(self) -> dict[str, Any]:
        """{'number': its place in the store's sequence (None for runs from before identities),
        'name': a name a person gave it (None: none yet), 'tags': [...]}, whatever the file holds."""
        try:
            stored = read_json(self.path / "identity.json", {})
        except ValueError:  # a damaged file: the run keeps its place, without a name
            stored = {}
        stored = stored if isinstance(stored, dict) else {}
        number, name, tags = stored.get("number"), stored.get("name"), stored.get("tags")
        return {
            "number": number if isinstance(number, int) and not isinstance(number, bool) else None,
            "name": name if isinstance(name, str) and name.strip() else None,
            "tags": [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
        }

    def set_identity(self, name: str | None = None, tags: Sequence[str] | None = None) -> dict[str, Any]:
        """Rename and / or retag the run (None leaves that part as it is; an empty name removes
        the name). Names and tags are single lines, trimmed; tags are kept once each, in order.
        Raises SpecError for a name or tag too long, or too many tags."""
        identity = self.identity
        if name is not None:
            identity["name"] = _one_line(name, NAME_LENGTH, "A run's name") or None
        if tags is not None:
            cleaned = [_one_line(tag, TAG_LENGTH, "A tag") for tag in tags]
            cleaned = list(dict.fromkeys(tag for tag in cleaned if tag))
            if len(cleaned) > MAX_TAGS:
                raise SpecError(f"A run takes at most {MAX_TAGS} tags, not {len(cleaned)}.")
            identity["tags"] = cleaned
        atomic_write_json(self.path / "identity.json", identity)
        return identity


class RunStore:
    """A folder of runs."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()

    def create(self, spec: Mapping[str, Any], name: str | None = None, tags: Sequence[str] = ()) -> Run:
        """A new queued run; it takes the next number of this store (one more than the highest
        so far), which names it until a person gives it a name."""
        self.root.mkdir(parents=True, exist_ok=True)
        numbers = [r.identity["number"] for r in self.runs()]
        number = max([n for n in numbers if n is not None], default=len(numbers)) + 1
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        run_id = f"{stamp}-{spec.get('algorithm', 'run')}-{secrets.token_hex(2)}"
        run = Run(self.root / run_id)
        run.path.mkdir()
        atomic_write_json(run.path / "identity.json", {"number": number, "name": None, "tags": []})
        if name is not None or tags:
            run.set_identity(name, list(tags))
        atomic_write_json(run.path / "spec.json", {**spec, "run_id": run_id, "created": now_iso()})
        run.update_status(state="queued", round=0)
        return run

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs())

    def runs(self) -> list[Run]:
        """Newest first; folders without a spec (not runs) are ignored."""
        if not self.root.is_dir():
            return []
        found = [Run(p) for p in self.root.iterdir() if (p / "spec.json").is_file()]
        return sorted(found, key=lambda r: r.id, reverse=True)

    def get(self, run_id: str) -> Run:
        """A run by id, or by a unique prefix of its id."""
        exact = self.root / run_id
        if (exact / "spec.json").is_file():
            return Run(exact)
        matches = [r for r in self.runs() if r.id.startswith(run_id)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise RunNotFound(f"No run '{run_id}' in {self.root}. `python -m fedcore list` shows them.")
        ids = ", ".join(r.id for r in matches[:5])
        raise RunNotFound(f"'{run_id}' matches several runs ({ids}); give more of the id.")

    def delete(self, run_id: str) -> None:
        shutil.rmtree(self.get(run_id).path)


def _one_line(text: str, limit: int, what: str) -> str:
    cleaned = " ".join(str(text).split())  # newlines and runs of spaces become one space
    if len(cleaned) > limit:
        raise SpecError(f"{what} has at most {limit} characters; this one has {len(cleaned)}.")
    return cleaned


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _worker_alive(status: Mapping[str, Any]) -> bool:
    """Whether the process that writes this run still exists.

    Only decidable on the host that started it; elsewhere a heartbeat older than ten minutes
    counts as dead.
    """
    pid, host = status.get("pid"), status.get("host")
    if pid and host == socket.gethostname():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not _is_zombie(int(pid))
    heartbeat = status.get("heartbeat")
    return heartbeat is None or time.time() - float(heartbeat) < 600


def _is_zombie(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] == "Z"
