"""Check a registry's views against its decision records, and repair them.

The decision records (:mod:`dpipe.registry._records`) are what was committed;
``history.jsonl`` and ``champion.json`` are views of them. :func:`inspect_registry`
compares the three and says what disagrees; :func:`apply_repair` makes the views
agree again. Nothing committed is ever removed:

* ``history.jsonl`` that lacks the last decision's line, or ends in a torn line, is
  what a writer killed after its commit leaves: the line is added (logged at INFO);
* any other difference (lines lost, a cut file, a deleted file, a line that is not a
  record) is damage: the file is rebuilt from the records with a warning, and the
  damaged one is kept beside it as ``history.jsonl.damaged-TIME``;
* ``champion.json`` one decision behind is again a killed writer's (INFO); missing or
  naming another decision, it is restored with a warning (the old one kept aside);
* a history line whose record file is gone is written back as a record when it can be
  (its version folder is there): the record is restored with a warning;
* ``.tmp-*`` entries are writes that never committed (the record is written inside
  them, before the rename that commits): each is removed and logged (a symbolic link is
  removed itself, never what it points to, and said to be one);
* a missing ``registry.json`` beside intact decision records is written again (warning).

What cannot be settled from the files - a history line or ``champion.json`` naming a
version folder that is gone, a version folder with neither a record nor a history line, a
line that contradicts its record, a committed version without its ``model.json`` or
``entry.json`` - stops a writer with one line saying which file to restore or move.

**One verdict.** Every reader of the registry (``dpipe registry list / show / history``,
:meth:`~dpipe.registry.Registry.model`, ``retrain``) and ``repair`` run this same check: what
cannot be settled is the same one-line error (exit 1) for each of them, never a fallback to
what the remaining records say (a deleted champion would otherwise serve the previous one); what
a repair settles is a warning for a reader, which reads the records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import logging
import os
import shutil
from typing import Any

from .._interrupts import check_interrupted
from ..exceptions import RegistryError
from ..io._manifest import write_json_atomic
from ._records import (
    CHAMPION_ACTIONS,
    CHAMPION_NAME,
    HISTORY_NAME,
    MARKER_NAME,
    RECORD_NAME,
    VERSION_ACTIONS,
    history_bytes,
    read_history,
    read_pointer,
    read_records,
    write_decision_file,
    write_marker,
    write_pointer,
)

__all__ = ["Findings", "inspect_registry", "apply_repair", "raise_unsettled", "upgrade_records"]

log = logging.getLogger("dpipe.registry")


@dataclasses.dataclass
class Findings:
    """How a registry's views and records disagree (empty lists and None: they agree).

    Attributes
    ----------
    records : list of dict
        Every committed decision, in ``seq`` order, restorable ones included: what readers see.
    restore : list of dict
        Records to write back from history lines whose record file is gone.
    unsettled : list of str
        One line each for what cannot be settled from the files.
    history : str or None
        What is wrong with ``history.jsonl``.
    history_damaged : bool
        More than a killed writer's missing or torn last line.
    pointer : str or None
        What is wrong with ``champion.json``.
    pointer_damaged : bool
        More than a pointer one decision behind.
    temporaries : list of str
        Uncommitted writes to remove.
    marker : str or None
        What is wrong with ``registry.json`` (missing beside intact records), or None.
    """

    records: list[dict[str, Any]]
    restore: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    unsettled: list[str] = dataclasses.field(default_factory=list)
    history: str | None = None
    history_damaged: bool = False
    pointer: str | None = None
    pointer_damaged: bool = False
    temporaries: list[str] = dataclasses.field(default_factory=list)
    marker: str | None = None
    links: list[str] = dataclasses.field(default_factory=list)  # the temporaries that are symbolic links

    @property
    def damage(self) -> list[str]:
        """What a reader should be warned of: damage, not a killed writer's roll-forward."""
        out = [f"{MARKER_NAME}: {self.marker}"] if self.marker is not None else []
        out += [f"{HISTORY_NAME}: {self.history}"] if self.history_damaged else []
        out += [f"{CHAMPION_NAME}: {self.pointer}"] if self.pointer_damaged else []
        out += [f"{RECORD_NAME} of {r['version']} is missing: restored from its history line" if r["action"] in VERSION_ACTIONS
                else f"the record of decision {r['seq']} ({r['action']}) is missing: restored from its history line" for r in self.restore]
        return out + self.unsettled

    @property
    def changes(self) -> list[str]:
        """What a repair changes, one line each: the damage, a killed writer's roll-forward, the temporaries removed."""
        out = list(self.damage)
        out += [f"{HISTORY_NAME}: {self.history}"] if self.history is not None and not self.history_damaged else []
        out += [f"{CHAMPION_NAME}: {self.pointer}"] if self.pointer is not None and not self.pointer_damaged else []
        return out + [f"removed {os.path.basename(os.path.dirname(p))}/{os.path.basename(p)}"
                      f"{', a symbolic link (what it points to was kept)' if p in self.links else ''}, a write that never committed"
                      for p in self.temporaries]


def _differs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True)


def inspect_registry(root: str) -> Findings:
    """Compare the registry's records, ``history.jsonl`` and ``champion.json`` (reads only)."""
    disk = read_records(root)
    raw, lines = read_history(root)
    by_id = {r["id"]: r for r in disk.records}
    found = Findings(records=list(disk.records), temporaries=disk.temporaries, links=[p for p in disk.temporaries if os.path.islink(p)])
    unrecorded = set(disk.unrecorded)
    named = _restore_from_history(found, lines, by_id, unrecorded)
    pointer = read_pointer(root)
    named |= _restore_from_pointer(found, pointer, by_id, unrecorded)
    for version in sorted(unrecorded - named):
        found.unsettled.append(f"versions/{version} has no {RECORD_NAME} and no history line names it: dpipe cannot tell whether it was "
                               "committed; move it out of versions/ or restore its record")
    found.records = sorted(found.records + found.restore, key=lambda r: r["seq"])
    _check_versions(found, root)
    if not os.path.exists(os.path.join(root, MARKER_NAME)):
        found.marker = f"missing; the folder holds {len(found.records)} decision records (rebuilt by a repair)"
    _check_history(found, raw)
    _check_pointer(found, pointer)
    return found


def _restore_from_history(found: Findings, lines: list[dict[str, Any]], by_id: dict[str, dict[str, Any]], unrecorded: set[str]) -> set[str | None]:
    """The history lines whose record file is gone, to restore (or, when their version folder is gone too, unsettled);
    returns the versions they name."""
    named: set[str | None] = set()
    for number, line in enumerate(lines, 1):
        record = by_id.get(line["id"])
        if record is not None:
            if _differs(record, line):
                found.unsettled.append(f"{HISTORY_NAME} line {number} ({line.get('action')} {line.get('version')}) differs from its record; "
                                       f"move one of them aside")
            continue
        version = line.get("version")
        if not isinstance(line.get("seq"), int):
            found.unsettled.append(f"{HISTORY_NAME} line {number} has no sequence number (a registry written before per-version records?)")
        elif line.get("action") in VERSION_ACTIONS and version not in unrecorded:
            found.unsettled.append(f"{HISTORY_NAME} line {number} names {version} ({line['action']} at {line.get('time')}), but versions/{version} "
                                   "is missing: restore the folder from a backup")
        else:
            found.restore.append(line)
            if line.get("action") in VERSION_ACTIONS:
                named.add(version)
    return named


def _restore_from_pointer(found: Findings, pointer: dict[str, Any] | None, by_id: dict[str, dict[str, Any]], unrecorded: set[str]) -> set[str | None]:
    """``champion.json`` carries a whole committed record: one whose record file and history line are gone is restored
    from it (or unsettled, when its version folder is gone); returns the version it names, if restored."""
    restored = {r["id"] for r in found.restore}
    if not (pointer and isinstance(pointer.get("id"), str) and pointer["id"] not in by_id and pointer["id"] not in restored
            and isinstance(pointer.get("seq"), int)):
        return set()
    version = pointer.get("version")
    if pointer.get("action") in VERSION_ACTIONS and version not in unrecorded:
        found.unsettled.append(f"{CHAMPION_NAME} names {version} as the champion ({pointer['action']} at {pointer.get('time')}), but "
                               f"versions/{version} is missing: restore the folder from a backup")
        return set()
    found.restore.append(pointer)
    return {version} if pointer.get("action") in VERSION_ACTIONS else set()


def _check_versions(found: Findings, root: str) -> None:
    """A committed version keeps its model and its entry, and a decision names registered versions only."""
    for record in found.records:
        if record["action"] in VERSION_ACTIONS:
            for name, what in (("model.json", "model file"), ("entry.json", "entry")):
                if not os.path.isfile(os.path.join(root, "versions", record["version"], name)):
                    found.unsettled.append(f"the {what} of {record['version']} is missing (versions/{record['version']}/{name}; "
                                           f"{record['action']} at {record.get('time')}): restore it from a backup")
    registered = {r["version"] for r in found.records if r["action"] in VERSION_ACTIONS}
    for record in found.records:  # a decision about a version (promote, rollback, the champions around it) names a registered one
        named_here = [record.get("champion_before"), record.get("champion_after")]
        if record["action"] in ("promote", "rollback"):
            named_here.append(record.get("version"))
        for version in dict.fromkeys(v for v in named_here if v is not None):
            if version not in registered:
                found.unsettled.append(f"decision {record['seq']} ({record['action']} at {record.get('time')}) names {version}, but "
                                       f"versions/{version} is missing: restore the folder from a backup")


def _check_history(found: Findings, raw: bytes | None) -> None:
    records = found.records
    want = history_bytes(records)
    if raw == want or (raw is None and not records):
        return
    complete = b"" if raw is None else raw[: raw.rfind(b"\n") + 1]
    if complete == want:
        found.history = "a torn last line (a writer killed while appending it)"
    elif records and complete == history_bytes(records[:-1]) and raw is not None:
        found.history = f"the line of the last decision ({records[-1]['action']} {records[-1]['seq']}) is not written yet"
    else:
        found.history_damaged = True
        if raw is None:
            found.history = f"missing; {len(records)} decisions are recorded"
        else:
            readable = len(read_lines_matching(raw, records))
            found.history = f"damaged: {readable} of its lines match the {len(records)} recorded decisions"


def read_lines_matching(raw: bytes, records: list[dict[str, Any]]) -> list[bytes]:
    """The lines of ``raw`` that are exactly some record's line."""
    from ._records import history_line

    want = {history_line(r) for r in records}
    return [line + b"\n" for line in raw.split(b"\n") if line + b"\n" in want]


def _check_pointer(found: Findings, pointer: dict[str, Any] | None) -> None:
    changes = [r for r in found.records if r["action"] in CHAMPION_ACTIONS or r["action"] == "rollback"]
    want = changes[-1] if changes else None
    have = None if pointer is None else pointer.get("id")
    if (want is None and pointer is None) or (want is not None and have == want["id"] and not _differs(pointer or {}, want)):
        return
    if want is None:
        found.pointer, found.pointer_damaged = "names a champion, but no decision made one", True
    elif len(changes) >= 2 and have == changes[-2]["id"] and found.records[-1] is want:
        found.pointer = f"one decision behind ({want['action']} {want['seq']}: a writer killed after its commit)"
    else:
        found.pointer_damaged = True
        found.pointer = ("missing" if pointer is None else "unreadable" if not pointer else f"names decision {pointer.get('seq')} "
                         f"({pointer.get('champion_after')})") + f"; the decisions make {want['champion_after']} the champion"


def _stamp() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")


def _keep_aside(path: str) -> str:
    aside = f"{path}.damaged-{_stamp()}"
    os.replace(path, aside)
    return aside


def raise_unsettled(root: str, found: Findings) -> None:
    """Raise one line for what the files cannot settle (:attr:`Findings.unsettled`), if anything."""
    if found.unsettled:
        more = f" (and {len(found.unsettled) - 1} more: `dpipe registry repair {root}` lists them)" if len(found.unsettled) > 1 else ""
        raise RegistryError(f"{root}: {found.unsettled[0]}{more}")


def apply_repair(root: str, found: Findings) -> None:
    """Make ``history.jsonl`` and ``champion.json`` agree with the records, write back restorable records,
    remove uncommitted temporaries (each logged). Call under the writers' lock.

    Raises
    ------
    RegistryError
        Something cannot be settled from the files (:attr:`Findings.unsettled`); nothing was changed.
    """
    raise_unsettled(root, found)
    if found.marker is not None:
        write_marker(root, {"rebuilt": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")})
        log.warning("%s: %s was %s: written again", root, MARKER_NAME, found.marker)
    for path in found.temporaries:
        link = os.path.islink(path)
        if os.path.isdir(path) and not link:
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # a symbolic link itself, never what it points to
        if os.path.lexists(path):
            log.warning("%s: could not remove %s, a write that never committed", root, os.path.relpath(path, root))
        else:
            log.warning("%s: removed %s%s, a write that never committed", root, os.path.relpath(path, root),
                        ", a symbolic link (what it points to was kept)" if link else "")
    for record in found.restore:
        if record["action"] in VERSION_ACTIONS:
            write_json_atomic(os.path.join(root, "versions", record["version"], RECORD_NAME), record)
        else:
            write_decision_file(root, record)
        log.warning("%s: restored the record of decision %d (%s %s) from %s", root, record["seq"], record["action"], record.get("version"), HISTORY_NAME)
    if found.history is not None:
        path = os.path.join(root, HISTORY_NAME)
        aside = _keep_aside(path) if found.history_damaged and os.path.exists(path) else None
        write_json_lines_atomic(path, history_bytes(found.records))
        if found.history_damaged:
            log.warning("%s: %s was %s: rebuilt from the decision records%s", root, HISTORY_NAME, found.history,
                        f" (the damaged file is kept as {os.path.basename(aside)})" if aside else "")
        else:
            log.info("%s: %s: %s; completed", root, HISTORY_NAME, found.history)
    if found.pointer is not None:
        path = os.path.join(root, CHAMPION_NAME)
        changes = [r for r in found.records if r["action"] in CHAMPION_ACTIONS or r["action"] == "rollback"]
        aside = _keep_aside(path) if found.pointer_damaged and os.path.exists(path) else None
        if changes:
            write_pointer(root, changes[-1])
        if found.pointer_damaged:
            log.warning("%s: %s %s: restored from the decision records%s", root, CHAMPION_NAME, found.pointer,
                        f" (the old one is kept as {os.path.basename(aside)})" if aside else "")
        else:
            log.info("%s: %s was %s; brought up to date", root, CHAMPION_NAME, found.pointer)


def write_json_lines_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` through a temporary file, fsync and a rename."""
    import tempfile

    from .._modes import set_default_mode

    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        set_default_mode(tmp)
        check_interrupted()  # nothing is renamed into place after a signal
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def upgrade_records(root: str) -> int:
    """Give a registry of format 1 (no per-decision records) its records, from ``history.jsonl``.

    Format 1 committed a decision by its history line (or by ``champion.json``, whose record
    may not have reached the history yet); each becomes a record with ``seq`` = its place.
    A version folder that no decision names was, under format 1's own rule, never
    committed; it is not removed here but must be moved out first (one line says which).
    Returns the number of records written. Call under the writers' lock.
    """
    raw, lines = read_history(root)
    if raw is not None and raw.count(b"\n") != len(lines):
        raise RegistryError(f"{root}: {HISTORY_NAME} has lines that are not records; a registry of format 1 is upgraded from an intact "
                            "history only: restore it from a backup")
    pointer = read_pointer(root)
    if pointer and pointer.get("id") not in {r["id"] for r in lines}:
        lines.append(pointer)
    named = {r.get("version") for r in lines if r.get("action") in VERSION_ACTIONS}
    versions = os.path.join(root, "versions")
    for name in sorted(os.listdir(versions)) if os.path.isdir(versions) else []:
        if not name.startswith(".") and name not in named:
            raise RegistryError(f"{root}: versions/{name} is named by no decision of {HISTORY_NAME} (a retrain killed before its commit?); "
                                "move it out of versions/ and upgrade again")
    for seq, line in enumerate(lines, 1):
        record = dict(line, seq=seq)
        if record["action"] in VERSION_ACTIONS:
            folder = os.path.join(versions, record["version"])
            if not os.path.isdir(folder):
                raise RegistryError(f"{root}: {HISTORY_NAME} names {record['version']}, but versions/{record['version']} is missing: restore it first")
            write_json_atomic(os.path.join(folder, RECORD_NAME), record)
        else:
            write_decision_file(root, record)
    write_json_lines_atomic(os.path.join(root, HISTORY_NAME), history_bytes([dict(r, seq=i) for i, r in enumerate(lines, 1)]))
    changes = [dict(r, seq=i) for i, r in enumerate(lines, 1) if r["action"] in CHAMPION_ACTIONS or r["action"] == "rollback"]
    if changes:
        write_pointer(root, changes[-1])
    return len(lines)
