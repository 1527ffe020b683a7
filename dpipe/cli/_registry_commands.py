"""``dpipe retrain CONFIG`` and ``dpipe registry list|show|history|plot|promote|rollback|repair``."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_parsers", "COMMANDS"]


def add_parsers(sub: Any) -> None:
    """Add the ``retrain`` and ``registry`` sub-commands to the ``dpipe`` parser's sub-parsers."""
    p = sub.add_parser("retrain", help="train a challenger on new data under a churn constraint, promote it only when it beats the champion "
                                       "(exit 0 promoted, 3 kept, 1 failed)")
    p.add_argument("config", help="retrain configuration (YAML; see docs/retraining.md and workflows/README.md)")
    p.add_argument("--force", action="store_true", help="decide again even when these inputs were decided before")
    p.add_argument("--json", action="store_true", help="print the decision record as one JSON document on stdout (docs/json-output.md)")

    p = sub.add_parser("registry", help="list, show, promote or roll back the versions of a model registry")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB", prog=p.prog)
    q = verbs.add_parser("list", help="every version with its holdout metric and decision; * marks the champion")
    q.add_argument("registry")
    q = verbs.add_parser("show", help="a version's entry (training data, metrics, constraints) and its decision, as JSON")
    q.add_argument("registry")
    q.add_argument("version", nargs="?", help="default: the champion")
    q = verbs.add_parser("history", help="every decision, oldest first (JSON lines)")
    q.add_argument("registry")
    q = verbs.add_parser("plot", help="a PNG of the retrains: holdout metric of champion and challenger, churn, decision")
    q.add_argument("registry")
    q.add_argument("--out", required=True, help="PNG file to write (never inside the registry or a store); '-': the PNG on stdout (not a terminal)")
    q.add_argument("--overwrite", action="store_true", help="replace --out when it is a plot dpipe wrote")
    q = verbs.add_parser("promote", help="make a registered version the champion")
    q.add_argument("registry")
    q.add_argument("version")
    q.add_argument("--reason", default="promoted by hand")
    q = verbs.add_parser("rollback", help="make the previous champion the champion again")
    q.add_argument("registry")
    q.add_argument("--reason", default="rolled back by hand")
    q = verbs.add_parser("repair", help="check the registry and rebuild history.jsonl and champion.json from the versions' own decision records "
                                        "(exit 0 consistent or repaired, 1 what the files cannot settle)")
    q.add_argument("registry")
    for verb, q in verbs.choices.items():
        q.add_argument("--json", action="store_true", help=f"print one JSON document on stdout ({_JSON_HELP.get(verb, 'its result')}; fields: docs/json-output.md)")


#: what each registry verb's ``--json`` prints, for its help
_JSON_HELP = {
    "list": "every version with its decision and metric", "show": "the version's entry and decisions, as without --json",
    "history": "every decision, in one document", "plot": "the plot's path", "promote": "the decision record",
    "rollback": "the decision record", "repair": "what was found and changed",
}


def _cmd_retrain(a: argparse.Namespace) -> int:
    from ..registry import retrain
    from ._json import document, emit

    result = retrain(a.config, force=a.force)
    if a.json:  # the decision record, marked, and whether it was decided before (then nothing changed)
        emit(a, {**document("retrain"), **dict(sorted(result.record.items())), "repeated": result.repeated})
    else:
        again = " (already decided for these inputs; nothing changed)" if result.repeated else ""
        print(f"{result.action} {result.version}; champion {result.champion}{again}")
        for reason in result.reasons:
            print(f"  {reason}")
    return result.exit_code


def _cmd_registry(a: argparse.Namespace) -> int:
    from ..registry import Registry
    from ._json import document, emit

    reg = Registry(a.registry)
    kind = f"registry-{a.verb}"
    if a.verb == "list":
        champion, decided = reg.champion(), {r["version"]: r for r in reg.history() if r["action"] in ("promoted", "kept")}
        rows = []
        for v in reg.versions():
            e, r = reg.entry(v), decided.get(v, {})
            rows.append({"version": v, "champion": v == champion, "created": e["created"], "decision": r.get("action"), "metric": r.get("metric"),
                         "value": (r.get("challenger") or {}).get(r.get("metric", "")), "training_store": e.get("training", {}).get("store")})
        if a.json:
            emit(a, document(kind, registry=reg.path, champion=champion, versions=rows))
            return 0
        print(f"{'':1} {'version':8} {'created':25} {'decision':9} {'metric':>10}  training store")
        for row in rows:
            value = float("nan") if row["value"] is None else row["value"]
            print(f"{'*' if row['champion'] else ' ':1} {row['version']:8} {row['created']:25} {row['decision'] or '-':9} {value:10.6f}  {row['training_store'] or '-'}")
    elif a.verb == "show":  # JSON with or without --json
        version = a.version or reg.champion()
        if version is None:
            from ..exceptions import RegistryError

            raise RegistryError(f"{reg.path}: no champion yet; name a version")
        decisions = [r for r in reg.history() if r.get("version") == version]
        emit(a, document(kind, version=version, champion=version == reg.champion(), entry=reg.entry(version), decisions=decisions))
    elif a.verb == "history":
        if a.json:
            emit(a, document(kind, registry=reg.path, decisions=reg.history()))
            return 0
        for r in reg.history():  # JSON lines, one per decision
            print(json.dumps(r, sort_keys=True))
    elif a.verb == "plot":
        _plot(a, reg, kind)
    elif a.verb == "repair":
        found = reg.repair()
        fixed = found.changes
        if a.json:
            emit(a, document(kind, registry=reg.path, repaired=bool(fixed), changes=list(fixed), decisions=len(found.records),
                             versions=len(reg.versions()), champion=reg.champion()))
            return 0
        state = f"{len(found.records)} decisions, {len(reg.versions())} versions, champion {reg.champion() or 'none'}"
        print(f"{reg.path}: {'repaired' if fixed else 'consistent'} ({state})")
        for line in fixed:
            print(f"  {line}")
    else:
        r = reg.promote(a.version, a.reason) if a.verb == "promote" else reg.rollback(a.reason)
        if a.json:
            emit(a, {**document(kind), **r})
            return 0
        done = "promoted" if a.verb == "promote" else "rolled back"
        print(f"{done} {r['version']}: champion {r['champion_before']} -> {r['champion_after']}")
    return 0


def _plot(a: argparse.Namespace, reg: Any, kind: str) -> None:
    """``registry plot``: the PNG to ``--out`` (``-``: written whole to a temporary folder, then copied to stdout)."""
    import os
    import tempfile

    from .._output import check_output_path
    from ..plotting import plot_retrain_history
    from ._json import STDOUT, check_binary_stdout, document, emit, emit_file

    title = f"retrains of {reg.path}"
    if a.out == STDOUT:
        if a.json:
            from ..exceptions import ParameterError

            raise ParameterError("--out - and --json both print on stdout; write the plot to a file with --out FILE to print --json's document")
        check_binary_stdout(a, "--out", "a PNG plot")
        with tempfile.TemporaryDirectory(prefix="dpipe-plot-") as tmp:
            emit_file(a, plot_retrain_history(reg.history(), os.path.join(tmp, "retrains.png"), title=title))
        return
    out = check_output_path(a.out, overwrite=a.overwrite, what="plot")
    path = plot_retrain_history(reg.history(), out, title=title)
    if a.json:
        emit(a, document(kind, registry=reg.path, path=os.path.abspath(path)))
    else:
        print(path)


COMMANDS = {"retrain": _cmd_retrain, "registry": _cmd_registry}
