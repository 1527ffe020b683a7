"""A model registry in a directory: versions, a champion pointer and an append-only history.

Layout::

    REGISTRY/
      registry.json            format marker
      versions/v0001/          one directory per version, written under a temporary
        model.json             name and renamed into place (a dpipe model file)
        entry.json             what the version was trained on, its metrics, its constraints
      champion.json            the champion's version and the decision that made it champion
      history.jsonl            one JSON line per decision (promoted, kept, failed, promote, rollback)
      .lock                    writers hold an exclusive flock on it

Crash consistency. A decision commits at one atomic step: the rename of
``champion.json`` when it changes the champion, the append of its history line
otherwise. ``champion.json`` carries the decision's record, so a writer killed between
the rename and the append is repaired by the next writer (the record is appended);
a version directory that no committed decision names is what a killed retrain left,
and the next writer removes it, as it cuts a half-written last history line. Readers
skip both, so a registry read at any moment shows committed decisions only.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

from .._faults import kill_point
from .._modes import set_default_mode
from ..exceptions import RegistryError
from ..io._manifest import write_json_atomic
from ..model import LinearModel

__all__ = ["Registry", "REGISTRY_FORMAT", "CHAMPION_ACTIONS"]

REGISTRY_FORMAT = "dpipe-registry"
REGISTRY_FORMAT_VERSION = 1
#: history actions that set the champion (``rollback`` pops it)
CHAMPION_ACTIONS = ("promoted", "promote")
#: seconds a writer waits for another writer's lock before it gives up
LOCK_SECONDS = 600.0


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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
        ``path`` is not a registry (and ``create`` is False), or not one this dpipe reads.
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = False) -> None:
        self.path = os.path.abspath(os.fspath(path))
        marker = os.path.join(self.path, "registry.json")
        if not os.path.exists(marker):
            if not create:
                raise RegistryError(f"{self.path}: not a dpipe model registry (no registry.json); `dpipe retrain` creates one")
            if os.path.isdir(self.path) and os.listdir(self.path):
                raise RegistryError(f"{self.path}: exists and is not empty; a new registry needs a new or empty directory")
            os.makedirs(os.path.join(self.path, "versions"), exist_ok=True)
            write_json_atomic(marker, {"format": REGISTRY_FORMAT, "format_version": REGISTRY_FORMAT_VERSION, "created": _now()})
        try:
            with open(marker) as f:
                head = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise RegistryError(f"{marker}: unreadable ({exc})") from None
        if not isinstance(head, dict) or head.get("format") != REGISTRY_FORMAT:
            raise RegistryError(f"{marker}: not a dpipe model registry")
        if head.get("format_version") != REGISTRY_FORMAT_VERSION:
            raise RegistryError(f"{marker}: registry format version {head.get('format_version')!r}; this dpipe reads {REGISTRY_FORMAT_VERSION}")

    def __repr__(self) -> str:
        return f"Registry({self.path!r})"

    # -- reading ------------------------------------------------------------------
    def history(self) -> list[dict[str, Any]]:
        """Every committed decision, oldest first (a half-written last line is skipped)."""
        out = self._history_lines()
        pending = self._champion_record()
        if pending is not None and pending["id"] not in {r["id"] for r in out}:
            out.append(pending)  # committed by the rename of champion.json; its history line was not appended yet
        return out

    def _history_lines(self) -> list[dict[str, Any]]:
        """The records of ``history.jsonl``'s complete lines."""
        path = os.path.join(self.path, "history.jsonl")
        if not os.path.exists(path):
            return []
        with open(path, "rb") as f:
            complete = f.read().split(b"\n")[:-1]  # the text after the last newline is a line still (or never) being written
        out = []
        for number, line in enumerate(complete, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise RegistryError(f"{path}, line {number}: not JSON ({exc.msg})") from None
        return out

    def _champion_record(self) -> dict[str, Any] | None:
        path = os.path.join(self.path, "champion.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            try:
                return json.load(f)["decision"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise RegistryError(f"{path}: unreadable champion pointer ({exc})") from None

    def champion(self) -> str | None:
        """The champion's version (None: no champion yet)."""
        record = self._champion_record()
        return None if record is None else record["champion_after"]

    def versions(self) -> list[str]:
        """Versions some committed decision names, oldest first."""
        named = {r.get("version") for r in self.history()}
        return sorted(v for v in self._version_dirs() if v in named)

    def _version_dirs(self) -> list[str]:
        root = os.path.join(self.path, "versions")
        return sorted(d for d in os.listdir(root) if d.startswith("v") and not d.startswith(".")) if os.path.isdir(root) else []

    def entry(self, version: str) -> dict[str, Any]:
        """The version's entry: training data, metrics, constraint report, decision."""
        self._check_version(version)
        with open(os.path.join(self.path, "versions", version, "entry.json")) as f:
            return json.load(f)

    def model_path(self, version: str) -> str:
        """Path of the version's model file."""
        self._check_version(version)
        return os.path.join(self.path, "versions", version, "model.json")

    def model(self, version: str | None = None) -> LinearModel:
        """The version's model (default: the champion)."""
        version = version or self.champion()
        if version is None:
            raise RegistryError(f"{self.path}: no champion yet")
        return LinearModel.load(self.model_path(version))

    def _check_version(self, version: str) -> None:
        if version not in self.versions():
            known = ", ".join(self.versions()) or "none"
            raise RegistryError(f"{self.path}: no version {version!r} (versions: {known})")

    def find(self, key: str) -> dict[str, Any] | None:
        """The latest committed ``promoted`` / ``kept`` decision of a retrain with this input key."""
        for record in reversed(self.history()):
            if record.get("key") == key and record["action"] in ("promoted", "kept"):
                return record
        return None

    def champion_stack(self) -> list[str]:
        """Champions in promotion order, rolled-back ones removed: the last is the champion."""
        stack: list[str] = []
        for record in self.history():
            if record["action"] in CHAMPION_ACTIONS:
                stack.append(record["version"])
            elif record["action"] == "rollback":
                stack.pop()
        return stack

    # -- writing ------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self) -> Iterator[Registry]:
        """Hold the writers' lock and repair what a killed writer left (see the module docstring)."""
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
                self._repair()
                yield self
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _repair(self) -> None:
        path = os.path.join(self.path, "history.jsonl")
        if os.path.exists(path):
            with open(path, "rb+") as f:
                raw = f.read()
                end = raw.rfind(b"\n") + 1
                if end != len(raw):  # a line cut by a kill: never committed
                    f.truncate(end)
        record = self._champion_record()
        if record is not None and record["id"] not in {r["id"] for r in self._history_lines()}:  # killed between the rename and the append
            self._append(record)
        named = {r.get("version") for r in self.history()}
        root = os.path.join(self.path, "versions")
        for d in os.listdir(root):
            if d.startswith(".tmp-") or (d.startswith("v") and d not in named):  # a killed writer's, never committed
                shutil.rmtree(os.path.join(root, d), ignore_errors=True)

    def add_version(self, model: LinearModel, entry: dict[str, Any]) -> str:
        """Write a new version (under a temporary name, then renamed); call inside :meth:`writing`.

        The version stays invisible until a decision naming it is committed by :meth:`commit`.
        """
        root = os.path.join(self.path, "versions")
        tmp = tempfile.mkdtemp(prefix=".tmp-", dir=root)
        model.save(os.path.join(tmp, "model.json"))
        dirs = self._version_dirs()
        version = f"v{(int(dirs[-1][1:]) + 1) if dirs else 1:04d}"
        write_json_atomic(os.path.join(tmp, "entry.json"), {"version": version, "created": _now(), "model_digest": model.digest(), **entry})
        set_default_mode(tmp)
        kill_point("version-written")
        os.rename(tmp, os.path.join(root, version))
        return version

    def commit(self, action: str, *, version: str | None, reasons: list[str], **fields: Any) -> dict[str, Any]:
        """Commit a decision; call inside :meth:`writing`. Returns its record.

        ``promoted`` / ``promote`` make ``version`` the champion and ``rollback`` the one
        before the champion: these commit by renaming ``champion.json``. ``kept`` and
        ``failed`` commit by appending their history line.
        """
        before = self.champion()
        record: dict[str, Any] = {"id": uuid.uuid4().hex, "time": _now(), "action": action, "version": version,
                                  "champion_before": before, "champion_after": before, "reasons": list(reasons), **fields}
        if action in CHAMPION_ACTIONS or action == "rollback":
            if action == "rollback":
                stack = self.champion_stack()
                if len(stack) < 2:
                    raise RegistryError(f"{self.path}: nothing to roll back to (champions so far: {', '.join(stack) or 'none'})")
                record["version"] = stack[-1]
                record["champion_after"] = stack[-2]
            else:
                record["champion_after"] = version
            kill_point("before-champion")
            write_json_atomic(os.path.join(self.path, "champion.json"), {"version": record["champion_after"], "decision": record})
            kill_point("after-champion")
        self._append(record)
        return record

    def promote(self, version: str, reason: str = "promoted by hand") -> dict[str, Any]:
        """Make a registered version the champion (a ``promote`` decision). Returns its record."""
        with self.writing():
            self._check_version(version)
            if version == self.champion():
                raise RegistryError(f"{self.path}: {version} is already the champion")
            return self.commit("promote", version=version, reasons=[reason])

    def rollback(self, reason: str = "rolled back by hand") -> dict[str, Any]:
        """Make the previous champion the champion again (a ``rollback`` decision). Returns its record."""
        with self.writing():
            return self.commit("rollback", version=None, reasons=[reason])

    def _append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode()
        fd = os.open(os.path.join(self.path, "history.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
