"""A model registry in a directory: versions that carry their own decision records, a champion pointer, a history log.

Layout::

    REGISTRY/
      registry.json            format marker
      versions/v0001/          one folder per version, written under versions/.tmp-* and renamed into place
        model.json             a dpipe model file
        entry.json             what the version was trained on, its metrics, its constraints, its parent
        decision.json          the decision that registered it (promoted or kept): the commit
      decisions/000003-promote.json    records of decisions that register no version (failed, promote, rollback)
      champion.json            the champion's version and the decision that made it champion (a view)
      history.jsonl            one JSON line per decision, in order (a view)
      .lock                    writers hold an exclusive flock on it

Crash consistency. A decision commits at one atomic step, the rename of its record
into place (:mod:`dpipe.registry._records`): for a new version, the rename of the whole
version folder, record inside. ``champion.json`` and ``history.jsonl`` are then brought
up to date; a writer killed in between leaves them one decision behind, and the next
writer completes them (:mod:`dpipe.registry._repair`). Readers take the history and the
champion from the records, so they see every committed decision at once and never an
uncommitted one, whatever state the views are in. A committed version is never removed:
only ``.tmp-*`` folders, which hold no committed record, are.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

from .._faults import kill_point
from .._formats import REGISTRY_FORMAT
from .._interrupts import check_interrupted
from .._modes import set_default_mode
from ..exceptions import RegistryError
from ..io._manifest import write_json_atomic
from ..model import LinearModel
from ._records import (
    CHAMPION_ACTIONS,
    RECORD_NAME,
    VERSION_ACTIONS,
    VERSION_NAME,
    champion_stack,
    file_sha256,
    history_line,
    holds_records,
    write_decision_file,
    write_pointer,
)
from ._repair import Findings, apply_repair, inspect_registry, raise_unsettled, upgrade_records

__all__ = ["Registry", "REGISTRY_FORMAT", "CHAMPION_ACTIONS"]

log = logging.getLogger("dpipe.registry")

#: 1: decisions committed by their history line (dpipe 0.1.0 up to per-version records); 2: by their record files
REGISTRY_FORMAT_VERSION = 2
#: seconds a writer waits for another writer's lock before it gives up
LOCK_SECONDS = 600.0


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class Registry:
    """A model registry directory (see the module docstring for its layout).

    Parameters
    ----------
    path : str or os.PathLike
        The registry directory.
    create : bool
        Create an empty registry when ``path`` does not exist (or is an empty directory).

    Raises
    ------
    RegistryError
        ``path`` is not a registry (and ``create`` is False), or not one this dpipe reads
        (a registry of format 1 is upgraded by :meth:`repair`, ``dpipe registry repair``).
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = False) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self._marker = os.path.join(self.path, "registry.json")
        lost = not os.path.exists(self._marker) and holds_records(self.path)  # its records intact: damage a repair settles
        if not os.path.exists(self._marker) and not lost:
            if not create:
                raise RegistryError(f"{self.path}: not a dpipe model registry (no registry.json); `dpipe retrain` creates one")
            if os.path.isdir(self.path) and os.listdir(self.path):
                raise RegistryError(f"{self.path}: exists and is not empty; a new registry needs a new or empty directory")
            os.makedirs(os.path.join(self.path, "versions"), exist_ok=True)
            write_json_atomic(self._marker, {"format": REGISTRY_FORMAT, "format_version": REGISTRY_FORMAT_VERSION, "created": _now()})
        self.format_version = REGISTRY_FORMAT_VERSION if lost else self._read_format()
        if self.format_version != REGISTRY_FORMAT_VERSION and self.format_version != 1:
            raise RegistryError(f"{self._marker}: registry format version {self.format_version!r}; this dpipe reads {REGISTRY_FORMAT_VERSION}")
        self._found: Findings | None = None
        self._generation: tuple | None = None
        self._warned: set[str] = set()

    def _read_format(self) -> Any:
        try:
            with open(self._marker) as f:
                head = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise RegistryError(f"{self._marker}: unreadable ({exc})") from None
        if not isinstance(head, dict) or head.get("format") != REGISTRY_FORMAT:
            raise RegistryError(f"{self._marker}: not a dpipe model registry")
        return head.get("format_version")

    def __repr__(self) -> str:
        return f"Registry({self.path!r})"

    # -- reading ------------------------------------------------------------------
    def _state(self) -> Findings:
        """The records and how the views disagree with them; read again when the registry's files changed."""
        if self.format_version == 1:
            raise RegistryError(f"{self.path}: a registry of format 1 (written before versions carried their own records); "
                                f"`dpipe registry repair {self.path}` upgrades it")
        generation = tuple(_stat(os.path.join(self.path, name)) for name in ("versions", "decisions", "history.jsonl", "champion.json"))
        if self._found is None or generation != self._generation:
            found = inspect_registry(self.path)
            raise_unsettled(self.path, found)  # the check repair runs: what the files cannot settle is this one line for every reader
            self._found, self._generation = found, generation
            for line in found.damage:
                if line not in self._warned:
                    self._warned.add(line)
                    log.warning("%s: %s (readers use the decision records; `dpipe registry repair %s` or the next writer repairs it)",
                                self.path, line, self.path)
        return self._found

    def history(self) -> list[dict[str, Any]]:
        """Every committed decision, oldest first, from the decision records."""
        return [dict(r) for r in self._state().records]

    def champion(self) -> str | None:
        """The champion's version (None: no decision made one yet), from the decision records."""
        stack = self.champion_stack()
        return stack[-1] if stack else None

    def champion_stack(self) -> list[str]:
        """Champions in promotion order, rolled-back ones removed: the last is the champion."""
        return champion_stack(self._state().records)

    def versions(self) -> list[str]:
        """Every registered version, oldest first."""
        return [r["version"] for r in self._state().records if r["action"] in VERSION_ACTIONS]

    def record(self, version: str) -> dict[str, Any]:
        """The decision that registered ``version``."""
        for r in self._state().records:
            if r["action"] in VERSION_ACTIONS and r["version"] == version:
                return dict(r)
        known = ", ".join(self.versions()) or "none"
        raise RegistryError(f"{self.path}: no version {version!r} (versions: {known})")

    def entry(self, version: str) -> dict[str, Any]:
        """The version's entry: training data, metrics, constraint report, parent."""
        self.record(version)
        path = os.path.join(self.path, "versions", version, "entry.json")
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError) as exc:
            raise RegistryError(f"{path}: unreadable ({exc})") from None

    def model_path(self, version: str) -> str:
        """Path of the version's model file (not checked: see :meth:`checked_model_path`)."""
        self.record(version)
        return os.path.join(self.path, "versions", version, "model.json")

    def checked_model_path(self, version: str) -> str:
        """Path of the version's model file, after checking it is the file that was registered.

        Raises
        ------
        RegistryError
            The file is missing, or its bytes or its weights differ from the digests its record holds.
        """
        record = self.record(version)
        path = os.path.join(self.path, "versions", version, "model.json")
        if not os.path.isfile(path):
            raise RegistryError(f"{path}: the model file of {version} is missing; restore it from a backup")
        want = record.get("model_sha256")
        if want is not None and (have := file_sha256(path)) != want:
            raise RegistryError(f"{path}: changed after it was registered (sha256 {have[:16]}..., recorded {want[:16]}...); "
                                "restore it, or register the changed model as a new version")
        if want is None and record.get("model_digest") is not None and LinearModel.load(path).digest() != record["model_digest"]:
            raise RegistryError(f"{path}: its weights changed after it was registered (digest differs from the record's); restore it")
        return path

    def model(self, version: str | None = None) -> LinearModel:
        """The version's model (default: the champion), checked against its record's digests."""
        version = version or self.champion()
        if version is None:
            raise RegistryError(f"{self.path}: no champion yet")
        return LinearModel.load(self.checked_model_path(version))

    def find(self, key: str) -> dict[str, Any] | None:
        """The latest committed ``promoted`` / ``kept`` decision of a retrain with this input key."""
        for record in reversed(self._state().records):
            if record.get("key") == key and record["action"] in VERSION_ACTIONS:
                return dict(record)
        return None

    def check_writable(self) -> None:
        """Raise the one-line :class:`RegistryError` a writer would meet (what the files cannot settle), before any work."""
        raise_unsettled(self.path, self._state())

    # -- writing ------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self) -> Iterator[Registry]:
        """Hold the writers' lock and bring the views up to date with the records first (see :mod:`dpipe.registry._repair`).

        Raises
        ------
        RegistryError
            Another writer held the lock for ``LOCK_SECONDS``, or the registry has damage the files cannot settle.
        """
        with self._lock():
            self._state()  # readers' warnings first, then the repair's
            apply_repair(self.path, inspect_registry(self.path))
            self._found = None
            yield self

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        with open(os.path.join(self.path, ".lock"), "a+") as lock:
            deadline = time.monotonic() + LOCK_SECONDS
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise RegistryError(f"{self.path}: another writer has held the registry's lock for {LOCK_SECONDS:.0f} s") from None
                    time.sleep(0.2)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def commit(self, action: str, *, reasons: list[str], version: str | None = None, model: LinearModel | None = None,
               entry: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
        """Commit a decision; call inside :meth:`writing`. Returns its record.

        Parameters
        ----------
        action : {"promoted", "kept", "failed", "promote", "rollback"}
        reasons : list of str
            Why, one sentence each.
        version : str, optional
            ``promote``: the version to make champion.
        model, entry : optional
            ``promoted`` / ``kept``: the model to register as a new version and its entry
            (training data, metrics, ...); the version's folder, record inside, is the commit.
        **fields
            More fields of the record (the retrain's key, metric, holdout figures).
        """
        if (action in VERSION_ACTIONS) != (model is not None):
            raise ValueError(f"commit({action!r}): a model goes with promoted / kept decisions, and only with them")
        records = self._state().records
        stack = champion_stack(records)
        before = stack[-1] if stack else None
        record: dict[str, Any] = {"id": uuid.uuid4().hex, "seq": (records[-1]["seq"] + 1) if records else 1, "time": _now(), "action": action,
                                  "version": version, "champion_before": before, "champion_after": before, "reasons": list(reasons), **fields}
        if action == "rollback":
            if len(stack) < 2:
                raise RegistryError(f"{self.path}: nothing to roll back to (champions so far: {', '.join(stack) or 'none'})")
            self.checked_model_path(stack[-2])
            record["version"], record["champion_after"] = stack[-1], stack[-2]
        elif action == "promote":
            if version is None:
                raise ValueError("commit('promote'): the version to make champion goes with it")
            self.checked_model_path(version)
            record["champion_after"] = version
        if model is not None:
            self._write_version(record, model, entry or {})
        else:
            write_decision_file(self.path, record)
        kill_point("committed")
        self._found = None
        if action in CHAMPION_ACTIONS or action == "rollback":
            write_pointer(self.path, record)
            kill_point("after-champion")
        self._append(record)
        self._found = None
        return record

    def _write_version(self, record: dict[str, Any], model: LinearModel, entry: dict[str, Any]) -> None:
        """Write the new version's folder under a temporary name, its record inside, and rename it into place (the commit)."""
        root = os.path.join(self.path, "versions")
        taken = [int(d[1:]) for d in os.listdir(root) if VERSION_NAME.fullmatch(d)]
        version = f"v{max(taken, default=0) + 1:04d}"
        record["version"] = version
        if record["action"] in CHAMPION_ACTIONS:
            record["champion_after"] = version
        tmp = tempfile.mkdtemp(prefix=".tmp-", dir=root)
        model_file = os.path.join(tmp, "model.json")
        model.save(model_file)
        record.update(model_digest=model.digest(), model_sha256=file_sha256(model_file), parent=record["champion_before"])
        write_json_atomic(os.path.join(tmp, "entry.json"), {"version": version, "created": record["time"], "model_digest": record["model_digest"],
                                                            "parent": record["parent"], **entry})
        write_json_atomic(os.path.join(tmp, RECORD_NAME), record)
        set_default_mode(tmp)
        kill_point("version-written")
        check_interrupted()  # nothing is renamed into place after a signal
        os.rename(tmp, os.path.join(root, version))
        _fsync_directory(root)

    def promote(self, version: str, reason: str = "promoted by hand") -> dict[str, Any]:
        """Make a registered version the champion (a ``promote`` decision). Returns its record."""
        with self.writing():
            self.record(version)
            if version == self.champion():
                raise RegistryError(f"{self.path}: {version} is already the champion")
            return self.commit("promote", version=version, reasons=[reason])

    def rollback(self, reason: str = "rolled back by hand") -> dict[str, Any]:
        """Make the previous champion the champion again (a ``rollback`` decision). Returns its record."""
        with self.writing():
            return self.commit("rollback", reasons=[reason])

    def repair(self) -> Findings:
        """Check the registry and make its views agree with its records (``dpipe registry repair``); returns what was found.

        A registry of format 1 is first given its records from its history (and marked format 2).

        Raises
        ------
        RegistryError
            What the files cannot settle (one line; nothing changed).
        """
        with self._lock():
            if self.format_version == 1:
                n = upgrade_records(self.path)
                write_json_atomic(self._marker, {"format": REGISTRY_FORMAT, "format_version": REGISTRY_FORMAT_VERSION, "created": _now(),
                                                 "upgraded_from": 1})
                self.format_version = REGISTRY_FORMAT_VERSION
                log.warning("%s: upgraded from format 1: %d decision records written from history.jsonl", self.path, n)
            found = inspect_registry(self.path)
            apply_repair(self.path, found)
            self._found = None
            return found

    def _append(self, record: dict[str, Any]) -> None:
        fd = os.open(os.path.join(self.path, "history.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, history_line(record))
            os.fsync(fd)
        finally:
            os.close(fd)


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def _fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
