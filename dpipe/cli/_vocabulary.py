"""One vocabulary per interface: the library's messages name Python parameters, the CLI's name its flags.

dpipe's functions raise and warn in Python terms - ``The 'lam' parameter of train must be
...``, ``pass overwrite=True``, ``raise 'max_iter'`` - because a Python user passes
``lam=``. The ``dpipe`` command shows the same messages with the flag its user typed:
``--lam must be ...``, ``pass --overwrite``, ``raise --max-iter``, ``use --objective error-rate``. Names the running
command has as options are rewritten (from its own parser); a keyword written bare, as a
Python call spells it (``pass positive= or negative=``, ``ingest it with like=``), is also
rewritten when another command has it (``ingest``'s ``--like``), so the command never
shows a Python spelling; a name in quotes that the command lacks keeps its words.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["cli_flags", "every_cli_flag", "in_cli_terms"]


def cli_flags(parser: argparse.ArgumentParser) -> dict[str, tuple[str, str]]:
    """``dest -> (long flag, kind)`` of every option of ``parser``; ``kind``: ``"negatable"`` (``--x`` / ``--no-x``),
    ``"negative"`` (only ``--no-x``, which sets it False) or ``"plain"``."""
    flags: dict[str, tuple[str, str]] = {}
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.dest == "help":
            continue
        if isinstance(action, argparse.BooleanOptionalAction):
            flags.setdefault(action.dest, (longs[0], "negatable"))
        elif all(o.startswith("--no-") for o in longs):
            flags.setdefault(action.dest, (longs[0], "negative"))
        else:
            flags.setdefault(action.dest, (next(o for o in longs if not o.startswith("--no-")), "plain"))
    return flags


def every_cli_flag(parser: argparse.ArgumentParser) -> dict[str, tuple[str, str]]:
    """:func:`cli_flags` of every command under ``parser`` (the first command's flag where two differ)."""
    flags: dict[str, tuple[str, str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for name, value in every_cli_flag(sub).items():
                    flags.setdefault(name, value)
    for name, value in cli_flags(parser).items():
        flags.setdefault(name, value)
    return flags


def in_cli_terms(message: str, flags: dict[str, tuple[str, str]], elsewhere: dict[str, tuple[str, str]] | None = None) -> str:
    """``message`` with the Python parameters the command has as options written as its flags (``flags``), and a bare
    ``name=`` as the flag of any command (``elsewhere``: :func:`every_cli_flag`)."""
    def flag(name: str) -> str | None:
        return flags[name][0] if name in flags else None

    def bare(m: re.Match) -> str:
        name = m.group(1)
        found = flag(name) or (elsewhere[name][0] if elsewhere and name in elsewhere else None)
        return found or m.group(0)

    def one(m: re.Match) -> str:
        return flag(m.group(1)) or m.group(0)

    def two(m: re.Match) -> str:
        a, b = flag(m.group(1)), flag(m.group(2))
        return f"{a} and {b}" if a and b else m.group(0)

    def boolean(m: re.Match) -> str:
        name, value = m.group(1), m.group(2) == "True"
        known = flags if name in flags else elsewhere or {}
        if name not in known:
            return m.group(0)
        long, kind = known[name]
        if kind == "negative":
            return long if not value else f"no {long}"
        if value:
            return long
        return "--no-" + long[2:] if kind == "negatable" else f"no {long}"

    message = re.sub(r"\b[Tt]he '(\w+)' and '(\w+)' parameters of [\w.]+", two, message)
    message = re.sub(r"\b[Tt]he '(\w+)' parameter of [\w.]+", one, message)
    message = re.sub(r"\b[Tt]he '(\w+)' parameter\b", one, message)
    message = re.sub(r"\b(\w+)=(True|False)\b", boolean, message)
    message = re.sub(r"\b(\w+)='([^']*)'", lambda m: f"{flag(m.group(1))} {m.group(2)}" if flag(m.group(1)) else m.group(0), message)
    message = re.sub(r"\b(\w+)=(?=$|[\s,;:/).])", bare, message)  # a keyword without its value: positive=, like=
    return re.sub(r"'(\w+)'", one, message)
