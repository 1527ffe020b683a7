"""``--help`` fits a terminal, ``--help-all`` holds everything, a usage error is one line with exit status 2, and a
closed stdout ends the command quietly (issue 43)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dpipe.cli._parser import EXIT_USAGE, plain, short_help
from dpipe.cli.main import EXIT_BROKEN_PIPE, build_parser

DPIPE = [sys.executable, "-m", "dpipe"]
MARKUP = ("``", ":func:", ":class:", "dpipe.fit.", "DPipeClassifier", "%%")


def command_parser(name: str):
    return build_parser()._subparsers._group_actions[0].choices[name]  # noqa: SLF001


def dpipe(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*DPIPE, *argv], capture_output=True, text=True, **kw)


def test_train_help_is_short_grouped_and_names_every_option():
    p = command_parser("train")
    text = short_help(p)
    lines = text.splitlines()
    assert len(lines) < 120 and max(map(len, lines)) <= 100
    assert not [m for m in MARKUP if m in text]
    titles = [line for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert titles[:3] == ["arguments:", "options:", "objectives (--objective NAME; docs/training.md):"]
    assert "options of several objectives (each one's help names them):" in titles
    assert "options of error-rate, false-negative-rate, false-positive-rate, auc-rate:" in titles
    assert titles.index("options:") < titles.index("cluster:") < titles.index(next(t for t in titles if t.startswith("ingest options")))
    flags = [f for a in p._actions for f in a.option_strings]  # noqa: SLF001
    assert len(flags) > 70 and not [f for f in flags if f not in text]  # every option is there, one line each
    assert lines[0] == "usage: dpipe train STORE --out OUT [options]"


def test_help_all_has_every_whole_text_without_markup():
    r = dpipe("train", "--help-all")
    assert r.returncode == 0 and len(r.stdout.splitlines()) > 300
    assert "error rate under rate constraints (Goh et al.)" in " ".join(r.stdout.split())  # the objectives' whole text
    assert "``" not in r.stdout and ":func:" not in r.stdout and "dpipe.fit.OBJECTIVES" not in r.stdout
    assert plain("see :func:`dpipe.train` and ``lam``") == "see dpipe.train and lam"


@pytest.mark.parametrize("argv, message", [
    (("train",), "dpipe train: error: the following arguments are required: store, --out (see dpipe train --help)"),
    (("train", "a.zarr"), "dpipe train: error: the following arguments are required: --out (see dpipe train --help)"),
    (("train", "a.zarr", "--out", "m.json", "--bogus"), "dpipe: error: unrecognized arguments: --bogus (see dpipe --help)"),
    (("registry", "plot", "reg"), "dpipe registry plot: error: the following arguments are required: --out (see dpipe registry plot --help)"),
    ((), "dpipe: error: the following arguments are required: COMMAND (see dpipe --help)"),
])
def test_a_usage_error_is_one_line_and_exit_status_2(argv, message):
    r = dpipe(*argv)
    assert r.returncode == EXIT_USAGE == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [message]


def test_every_command_help_fits_a_terminal():
    commands = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001
    for name, p in commands.items():
        text = short_help(p)
        assert len(text.splitlines()) < 120 and not [m for m in MARKUP if m in text], name


def test_a_closed_stdout_ends_quietly():
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte: every write fails with EPIPE
    try:
        r = subprocess.run([*DPIPE, "train", "--help-all"], stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert r.returncode == EXIT_BROKEN_PIPE == 141 and r.stderr == ""
