"""The last few alignments made in this process, reused while the files they read are unchanged.

A check-up aligns the same files many times: its start checks and loads the reference, and every
run it trains checks the reference again (`check_reference`, so that no run is created for files
that cannot combine) and loads it (`load_federation`). On HAR (30 sites, 10,299 rows, 265
columns) that was 14 alignments of 1.2-1.7 s each in one process, a fifth of the whole check-up.

An alignment depends only on what it was asked (the source, its reading and table options, a
dictionary's content) and on the files it read. It is kept under a key of both: the options as
JSON, and every file the source declares it reads (its path options, `Source.paths` and `.files`)
as it is on disk (size, modification time in ns, inode, and for a folder the same of everything in
it). A file changed, replaced or removed since gives another key, so it is read again. A reading
that names no file on disk is never kept: what it depends on cannot be told, so it is done again
every time (fails closed).

The alignment is shared by whoever asks with the same key; it is not changed after it is made
(its report, encoding, profile and check-up are each computed anew by the caller).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from data_adapters.alignment.align import Alignment
from fedcore.kept import Kept

KEPT = 2  # alignments kept (one data set's reference, and one more: a page comparing two)
MAX_FOLDER_ENTRIES = 2000  # a folder with more entries than this is not fingerprinted: never kept

_kept = Kept(KEPT)


def cached_alignment(options: Mapping[str, Any], files: Any, align: Callable[[], Alignment]) -> Alignment:
    """`align()`, or the alignment it made before for the same `options` (JSON-ready: the source,
    reading and table options, a dictionary's content) over the same `files` on disk (the paths
    the reading opens: strings, in lists or mappings at any depth)."""
    key = _key(options, files)
    return align() if key is None else _kept.get(key, align)


def forget() -> None:
    """Drop every kept alignment (tests; a process that wants the memory back)."""
    _kept.clear()


def _key(options: Mapping[str, Any], files: Any) -> str | None:
    """The options and the disk state of every file in `files`, as one string; None when none is
    on disk or a folder is too large to fingerprint."""
    states: dict[str, Any] = {}
    for text in _strings(files):
        state = _disk_state(text)
        if state is False:
            return None
        if state is not None:
            states[text] = state
    if not states:
        return None
    return json.dumps({"options": options, "files": states}, sort_keys=True, default=str)


def _strings(value: Any) -> Iterator[str]:
    """Every string in nested values (paths may sit in a list or a mapping)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _disk_state(text: str) -> list | None | bool:
    """A file's (size, mtime ns, inode), a folder's entries' (name and state), None when `text`
    names nothing on disk, False for a folder with more than MAX_FOLDER_ENTRIES entries."""
    if not text or "\0" in text or len(text) > 4096:
        return None
    try:
        stat = os.stat(text)
    except (OSError, ValueError):
        return None
    if not os.path.isdir(text):
        return [stat.st_size, stat.st_mtime_ns, stat.st_ino]
    entries = []
    for root, folders, names in os.walk(text):
        folders.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            try:
                entry = os.stat(path)
            except OSError:
                continue
            entries.append([os.path.relpath(path, text), entry.st_size, entry.st_mtime_ns, entry.st_ino])
            if len(entries) > MAX_FOLDER_ENTRIES:
                return False
    return [stat.st_mtime_ns, entries]
