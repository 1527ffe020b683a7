"""One truth for the registry (issue 41, item 4): every reader and ``repair`` give the same verdict on a damaged copy.

Twelve copies of a registry with every kind of decision (``busy``: v0001 and v0002 promoted, v0003 kept, a failed
retrain, a rollback, a promote of v0002: champion v0002), each damaged by hand. ``dpipe registry list / show / history
/ repair`` run as real processes, :meth:`Registry.model` in this one. What the files cannot settle is the same one-line
error (exit 1) for all five; what a repair settles is a warning for the readers, who all serve the recorded champion
(never the previous one), and the repair's own verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from retrain_helpers import copy_folder

from dpipe.exceptions import RegistryError
from dpipe.registry import Registry


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpipe", "registry", *args], capture_output=True, text=True, timeout=120, check=False)


def _rm(reg: Path, *names: str) -> None:
    for name in names:
        p = reg / name
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def _behind(reg: Path) -> None:
    """champion.json one decision behind: pointing at the rollback (decision 5), as a writer killed after its commit leaves it."""
    record = json.loads(next((reg / "decisions").glob("000005-rollback.json")).read_text())
    (reg / "champion.json").write_text(json.dumps({"version": record["champion_after"], "decision": record}))


def _torn(reg: Path) -> None:
    with open(reg / "history.jsonl", "ab") as f:
        f.write(b'{"action": "promo')


def _tmp_link(reg: Path) -> None:
    target = reg.parent / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("not the registry's")
    os.symlink(target, reg / "versions" / ".tmp-abcd1234")


def _unknown_folder(reg: Path) -> None:
    shutil.copytree(reg / "versions" / "v0003", reg / "versions" / "v0009")
    (reg / "versions" / "v0009" / "decision.json").unlink()


#: damage -> (how, the verdict: "repairable" or the start of the one error line every reader and repair give)
DAMAGE = {
    "entry.json of the champion deleted": (lambda r: _rm(r, "versions/v0002/entry.json"), "the entry of v0002 is missing"),
    "model.json of an old champion deleted": (lambda r: _rm(r, "versions/v0001/model.json"), "the model file of v0001 is missing"),
    "the champion's folder deleted": (lambda r: _rm(r, "versions/v0002"), "history.jsonl line 2 names v0002"),
    "the champion's folder and the history deleted": (lambda r: _rm(r, "versions/v0002", "history.jsonl"), "decision 3 (kept at"),
    "a version folder no decision names": (_unknown_folder, "versions/v0009 has no decision.json and no history line names it"),
    "registry.json deleted": (lambda r: _rm(r, "registry.json"), "repairable"),
    "history.jsonl deleted": (lambda r: _rm(r, "history.jsonl"), "repairable"),
    "history.jsonl torn": (_torn, "repairable"),
    "champion.json deleted": (lambda r: _rm(r, "champion.json"), "repairable"),
    "champion.json one decision behind": (_behind, "repairable"),
    "a version's decision.json deleted": (lambda r: _rm(r, "versions/v0003/decision.json"), "repairable"),
    "a symlinked .tmp-* in versions/": (_tmp_link, "repairable"),
}


def _reader_verdicts(reg: Path) -> dict[str, tuple[str, str | None]]:
    """Each reader's verdict: ("error", its one line) or ("ok", the champion it serves)."""
    out: dict[str, tuple[str, str | None]] = {}
    for verb in ("list", "show", "history"):
        r = _cli(verb, str(reg), "--json")
        if r.returncode:
            lines = [x for x in r.stderr.strip().splitlines() if x.startswith("dpipe registry: error: ")]
            assert len(lines) == 1, r.stderr
            out[verb] = ("error", lines[0].removeprefix("dpipe registry: error: "))
            continue
        doc = json.loads(r.stdout)
        if verb == "list":
            out[verb] = ("ok", doc["champion"])
        elif verb == "show":
            out[verb] = ("ok", doc["version"])
        else:
            out[verb] = ("ok", None)
    try:
        model = Registry(reg).model()
    except RegistryError as exc:
        out["Registry.model()"] = ("error", str(exc))
    else:
        digests = {v: json.loads((reg / "versions" / v / "decision.json").read_text())["model_digest"]
                   for v in os.listdir(reg / "versions") if (reg / "versions" / v / "decision.json").is_file()}
        out["Registry.model()"] = ("ok", next(v for v, d in digests.items() if d == model.digest()))
    return out


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_every_reader_and_repair_give_the_same_verdict(busy, tmp_path, damage):
    how, verdict = DAMAGE[damage]
    reg = copy_folder(busy, tmp_path) / "reg"
    how(reg)
    readers = _reader_verdicts(reg)
    repair = _cli("repair", str(reg))
    if verdict != "repairable":
        lines = {line for _, line in readers.values()}
        assert {kind for kind, _ in readers.values()} == {"error"} and len(lines) == 1, readers
        line = lines.pop()
        assert line == f"{reg}: " + line.removeprefix(f"{reg}: ") and line.removeprefix(f"{reg}: ").startswith(verdict), line
        assert repair.returncode == 1 and repair.stderr.strip().splitlines()[-1] == f"dpipe registry: error: {line}", repair.stderr
        return
    # settled by a repair: every reader serves the recorded champion (with a warning), the repair repairs, then all agree
    assert readers == {"list": ("ok", "v0002"), "show": ("ok", "v0002"), "history": ("ok", None), "Registry.model()": ("ok", "v0002")}, readers
    assert repair.returncode == 0 and f"{reg}: repaired (6 decisions, 3 versions, champion v0002)" in repair.stdout, repair.stdout + repair.stderr
    again = _cli("repair", str(reg))
    assert again.returncode == 0 and f"{reg}: consistent (6 decisions, 3 versions, champion v0002)" in again.stdout
    assert json.loads((reg / "champion.json").read_text())["version"] == "v0002" and (reg / "registry.json").is_file()
    if damage == "a symlinked .tmp-* in versions/":  # said to be a link, removed itself; what it pointed to kept
        assert "removed versions/.tmp-abcd1234, a symbolic link (what it points to was kept)" in repair.stdout
        assert not os.path.lexists(reg / "versions" / ".tmp-abcd1234") and (reg.parent / "elsewhere" / "keep.txt").is_file()


def test_a_failure_that_cannot_be_recorded_keeps_the_runs_own_error(busy, tmp_path, monkeypatch):
    """First error wins: the strict retrain fails (its constraint cannot be met); recording that failure meets a full disk
    (the decision file's writer raises ENOSPC); the run's own error is what comes out, the recording's noted on it."""
    import errno

    import dpipe.registry._records as records
    from dpipe.exceptions import ParameterError
    from dpipe.registry import retrain

    d = copy_folder(busy, tmp_path)

    def full_disk(path, obj, indent=1):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(records, "write_json_atomic", full_disk)
    monkeypatch.chdir(d)
    with pytest.raises(ParameterError, match="the challenger cannot meet") as info:
        retrain(d / "strict.yaml", force=True)
    assert any("not recorded in the registry: OSError" in note and "No space left on device" in note for note in info.value.__notes__)
    assert [r["action"] for r in Registry(d / "reg").history()][-1] == "promote"  # nothing half-recorded
