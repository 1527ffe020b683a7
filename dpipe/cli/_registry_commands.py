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
    p.add_argument("config", help="retrain configuration (YAML; see the README's 'Scheduled retraining')")
    p.add_argument("--force", action="store_true", help="decide again even when these inputs were decided before")
    p.add_argument("--json", dest="json_out", action="store_true", help="print the decision record as JSON")

    p = sub.add_parser("registry", help="list, show, promote or roll back the versions of a model registry")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    q = verbs.add_parser("list", help="every version with its holdout metric and decision; * marks the champion")
    q.add_argument("registry")
    q = verbs.add_parser("show", help="a version's entry (training data, metrics, constraints) and its decision, as JSON")
    q.add_argument("registry")
    q.add_argument("version", nargs="?", help="default: the champion")
    q = verbs.add_parser("history", help="every decision, oldest first (JSON lines)")
    q.add_argument("registry")
    q = verbs.add_parser("plot", help="a PNG of the retrains: holdout metric of champion and challenger, churn, decision")
    q.add_argument("registry")
    q.add_argument("--out", required=True, help="PNG file to write (never inside the registry or a store)")
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


def _cmd_retrain(a: argparse.Namespace) -> int:
    from ..registry import retrain

    result = retrain(a.config, force=a.force)
    if a.json_out:
        print(json.dumps(result.record, indent=1, sort_keys=True))
    else:
        again = " (already decided for these inputs; nothing changed)" if result.repeated else ""
        print(f"{result.action} {result.version}; champion {result.champion}{again}")
        for reason in result.reasons:
            print(f"  {reason}")
    return result.exit_code


def _cmd_registry(a: argparse.Namespace) -> int:
    from ..registry import Registry

    reg = Registry(a.registry)
    if a.verb == "list":
        champion, decided = reg.champion(), {r["version"]: r for r in reg.history() if r["action"] in ("promoted", "kept")}
        print(f"{'':1} {'version':8} {'created':25} {'decision':9} {'metric':>10}  training store")
        for v in reg.versions():
            e, r = reg.entry(v), decided.get(v, {})
            value = (r.get("challenger") or {}).get(r.get("metric", ""), float("nan"))
            print(f"{'*' if v == champion else ' ':1} {v:8} {e['created']:25} {r.get('action', '-'):9} {value:10.6f}  {e.get('training', {}).get('store', '-')}")
    elif a.verb == "show":
        version = a.version or reg.champion()
        if version is None:
            from ..exceptions import RegistryError

            raise RegistryError(f"{reg.path}: no champion yet; name a version")
        decisions = [r for r in reg.history() if r.get("version") == version]
        print(json.dumps({"entry": reg.entry(version), "decisions": decisions, "champion": version == reg.champion()}, indent=1, sort_keys=True))
    elif a.verb == "history":
        for r in reg.history():
            print(json.dumps(r, sort_keys=True))
    elif a.verb == "plot":
        from .._output import check_output_path
        from ..plotting import plot_retrain_history

        out = check_output_path(a.out, overwrite=a.overwrite, what="plot")
        print(plot_retrain_history(reg.history(), out, title=f"retrains of {reg.path}"))
    elif a.verb == "repair":
        found = reg.repair()
        fixed = found.changes
        state = f"{len(found.records)} decisions, {len(reg.versions())} versions, champion {reg.champion() or 'none'}"
        print(f"{reg.path}: {'repaired' if fixed else 'consistent'} ({state})")
        for line in fixed:
            print(f"  {line}")
    elif a.verb == "promote":
        r = reg.promote(a.version, a.reason)
        print(f"promoted {r['version']}: champion {r['champion_before']} -> {r['champion_after']}")
    else:
        r = reg.rollback(a.reason)
        print(f"rolled back {r['version']}: champion {r['champion_before']} -> {r['champion_after']}")
    return 0


COMMANDS = {"retrain": _cmd_retrain, "registry": _cmd_registry}
