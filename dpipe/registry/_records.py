"""The files of a model registry: decision records, the history log and the champion pointer.

Every decision is one immutable JSON record, written once under a temporary name and
renamed into place - that rename is the decision's commit:

* a decision that registers a model (``promoted``, ``kept``) keeps its record in the
  version's own folder, ``versions/vNNNN/decision.json``, beside ``model.json`` and
  ``entry.json``; the whole folder is written under ``versions/.tmp-*`` and renamed,
  so a version folder exists exactly when its decision is committed;
* the others (``failed``, ``promote``, ``rollback``) are ``decisions/NNNNNN-ACTION.json``.

A record carries a sequence number ``seq`` (1, 2, ...: the decisions' order), the
model's digests and its parent (the champion it was trained against). From the records
alone the whole history and the champion follow; ``history.jsonl`` (one line a record,
in ``seq`` order) and ``champion.json`` are views of them that writers keep in step and
that :mod:`dpipe.registry._repair` rebuilds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from .._formats import REGISTRY_FORMAT
from ..exceptions import RegistryError
from ..io._manifest import write_json_atomic
from ..io._source_cache import file_digest  # re-exported: the registry's records hash files with it

__all__ = [
    "RECORD_NAME", "DECISIONS_DIR", "HISTORY_NAME", "CHAMPION_NAME", "VERSION_NAME", "CHAMPION_ACTIONS", "VERSION_ACTIONS",
    "history_line", "history_bytes", "read_records", "read_history", "read_pointer", "write_pointer", "write_decision_file", "champion_stack",
    "file_digest", "file_sha256", "RecordsOnDisk", "MARKER_NAME", "REGISTRY_FORMAT_VERSION", "write_marker", "holds_records",
]

RECORD_NAME = "decision.json"
#: the registry's format marker
MARKER_NAME = "registry.json"
#: what :func:`write_marker` writes: the marker's format and the version of the layout this module describes
REGISTRY_FORMAT_VERSION = 2
DECISIONS_DIR = "decisions"
HISTORY_NAME = "history.jsonl"
CHAMPION_NAME = "champion.json"
#: a version folder's name: v0001, v0002, ... (more digits past 9999)
VERSION_NAME = re.compile(r"v\d{4,}")
#: actions that make their version the champion (``rollback`` pops it)
CHAMPION_ACTIONS = ("promoted", "promote")
#: actions that register a new version (their record lives in the version's folder)
VERSION_ACTIONS = ("promoted", "kept")
_DECISION_FILE = re.compile(r"(\d{6,})-[a-z]+\.json")


def history_line(record: dict[str, Any]) -> bytes:
    """A record as its ``history.jsonl`` line (sorted keys, so a rebuilt history is byte for byte the written one)."""
    return (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode()


def history_bytes(records: list[dict[str, Any]]) -> bytes:
    """The ``history.jsonl`` of these records (already in ``seq`` order)."""
    return b"".join(history_line(r) for r in records)


def file_sha256(path: str) -> str:
    """sha256 of a file's bytes."""
    return file_digest(path, hashlib.sha256())


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            record = json.load(f)
    except (OSError, ValueError) as exc:
        raise RegistryError(f"{path}: unreadable decision record ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("seq"), int) or not isinstance(record.get("id"), str):
        raise RegistryError(f"{path}: not a dpipe decision record (no 'seq' and 'id')")
    return record


class RecordsOnDisk:
    """What :func:`read_records` found.

    Attributes
    ----------
    records : list of dict
        Every committed decision record, in ``seq`` order.
    unrecorded : list of str
        Version folders with no ``decision.json`` (damage: a committed folder always has one).
    temporaries : list of str
        Paths of ``.tmp-*`` entries: writes that never committed.
    """

    def __init__(self, records: list[dict[str, Any]], unrecorded: list[str], temporaries: list[str]) -> None:
        self.records = records
        self.unrecorded = unrecorded
        self.temporaries = temporaries


def read_records(root: str) -> RecordsOnDisk:
    """Read every decision record of the registry at ``root`` (see the module docstring).

    Raises
    ------
    RegistryError
        A record is unreadable, names another version than its folder, or two records share a ``seq``.
    """
    records, unrecorded, temporaries = [], [], []
    versions = os.path.join(root, "versions")
    for name in sorted(os.listdir(versions)) if os.path.isdir(versions) else []:
        path = os.path.join(versions, name)
        if name.startswith(".tmp-"):
            temporaries.append(path)
        elif VERSION_NAME.fullmatch(name):
            record_path = os.path.join(path, RECORD_NAME)
            if not os.path.exists(record_path):
                unrecorded.append(name)
                continue
            record = _load(record_path)
            if record.get("version") != name:
                raise RegistryError(f"{record_path}: the record names version {record.get('version')!r}, not {name}")
            records.append(record)
    decisions = os.path.join(root, DECISIONS_DIR)
    for name in sorted(os.listdir(decisions)) if os.path.isdir(decisions) else []:
        path = os.path.join(decisions, name)
        if name.startswith("."):
            temporaries.append(path)
        elif _DECISION_FILE.fullmatch(name):
            records.append(_load(path))
    records.sort(key=lambda r: r["seq"])
    for a, b in zip(records, records[1:]):
        if a["seq"] == b["seq"]:
            raise RegistryError(f"{root}: two decisions have the sequence number {a['seq']} ({a['action']} {a['id']}, {b['action']} {b['id']})")
    return RecordsOnDisk(records, unrecorded, temporaries)


def read_history(root: str) -> tuple[bytes | None, list[dict[str, Any]]]:
    """``history.jsonl``'s bytes (None: no file) and the records of its lines that parse."""
    path = os.path.join(root, HISTORY_NAME)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None, []
    lines = []
    for line in raw.split(b"\n")[:-1]:  # the text after the last newline is a line still (or never) being written
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), str):
            lines.append(record)
    return raw, lines


def read_pointer(root: str) -> dict[str, Any] | None:
    """The decision record ``champion.json`` carries (None: no file, or not a pointer dpipe wrote)."""
    path = os.path.join(root, CHAMPION_NAME)
    try:
        with open(path, "rb") as f:
            pointer = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    decision = pointer.get("decision") if isinstance(pointer, dict) else None
    return decision if isinstance(decision, dict) else {}


def write_pointer(root: str, record: dict[str, Any]) -> None:
    """Point ``champion.json`` at the champion ``record`` made (temporary file, fsync, rename)."""
    write_json_atomic(os.path.join(root, CHAMPION_NAME), {"version": record["champion_after"], "decision": record})


def write_decision_file(root: str, record: dict[str, Any]) -> str:
    """Commit a record of a decision that registers no version: ``decisions/NNNNNN-ACTION.json`` (temporary file, rename)."""
    directory = os.path.join(root, DECISIONS_DIR)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{record['seq']:06d}-{record['action']}.json")
    write_json_atomic(path, record)
    return path


def write_marker(root: str, fields: dict[str, Any]) -> None:
    """Write ``registry.json``: the format marker, this layout's version and ``fields`` (temporary file, rename)."""
    write_json_atomic(os.path.join(root, MARKER_NAME), {"format": REGISTRY_FORMAT, "format_version": REGISTRY_FORMAT_VERSION, **fields})


def holds_records(root: str) -> bool:
    """Whether ``root`` holds a decision record (a registry that lost its ``registry.json``, not some other folder)."""
    versions = os.path.join(root, "versions")
    if os.path.isdir(versions) and any(VERSION_NAME.fullmatch(n) and os.path.isfile(os.path.join(versions, n, RECORD_NAME)) for n in os.listdir(versions)):
        return True
    decisions = os.path.join(root, DECISIONS_DIR)
    return os.path.isdir(decisions) and any(_DECISION_FILE.fullmatch(n) for n in os.listdir(decisions))


def champion_stack(records: list[dict[str, Any]]) -> list[str]:
    """Champions in promotion order, rolled-back ones removed: the last is the champion."""
    stack: list[str] = []
    for record in records:
        if record["action"] in CHAMPION_ACTIONS:
            stack.append(record["version"])
        elif record["action"] == "rollback" and stack:
            stack.pop()
    return stack
