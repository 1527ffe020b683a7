"""The ``dpipe`` command's argument parser: one function per command (its arguments), the options every command
shares (``-v``, ``-q``, ``--verify``, ``--json``), and :class:`_Parser`, which takes ``-v`` / ``-q`` after the command too.

The hyper-parameters, the cluster options and the ingest options are added from their declarations
(:mod:`dpipe.fit._params`, :mod:`dpipe.engine._cluster_spec`, :mod:`dpipe.io._ingest_options`), imported when the
parser is built so that ``dpipe --version`` stays light.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ._registry_commands import add_parsers as _add_registry_parsers

__all__ = ["build_parser", "COMMAND_PARSERS", "EXIT_USAGE", "plain", "short_help"]

#: the exit status of a usage error (a command line the parser refuses), as argparse and POSIX tools use it; every other
#: error is 1 (docs/cli.md, docs/json-output.md)
EXIT_USAGE = 2
#: the width ``--help`` lines are cut at when stdout is no terminal
HELP_WIDTH = 100


def plain(text: str) -> str:
    """Help text without reST markup: ````x```` and ```x``` as ``x``, ``:func:`x``` as ``x``, ``dpipe.fit.OBJECTIVES`` and
    other Python-only pointers dropped."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]+)`", r"\1", text)
    text = re.sub(r"\s*\((?:see )?dpipe\.fit\.OBJECTIVES\)", "", text)
    text = re.sub(r"\s*\([^()]*\bDPipeClassifier\b[^()]*\)", "", text)  # the Python spellings of an option, beside the flag
    text = text.replace("dpipe.fit.OBJECTIVES", "the objectives in docs/training.md")
    return text


def _summary(text: str | None) -> str:
    """The first sentence of a help text (up to a '.' or ';' outside parentheses), without markup."""
    if not text or text == argparse.SUPPRESS:
        return ""
    text = " ".join(plain(text).replace("%%", "%").split())
    depth = 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth == 0 and c in ".;" and (i + 1 == len(text) or text[i + 1] == " "):
            return text[:i]
    return text


def _invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar if isinstance(action.metavar, str) else action.dest
        return name.upper()
    flags = ", ".join(action.option_strings)
    if action.nargs == 0:
        return flags
    metavar = action.metavar
    if metavar is None:
        if action.choices and len(",".join(map(str, action.choices))) <= 30:
            metavar = "{" + ",".join(map(str, action.choices)) + "}"
        else:
            metavar = {int: "N", float: "X"}.get(action.type, "NAME" if action.choices else action.dest.upper())  # type: ignore[call-overload]  # a type callable as key
    return f"{flags} {metavar}"


def short_help(parser: argparse.ArgumentParser) -> str:
    """A command's help that fits a terminal: its usage line, then one line per option (its first sentence, cut at the
    terminal's width), grouped as the parser groups them; ``--help-all`` prints every option's whole text."""
    width = shutil.get_terminal_size((HELP_WIDTH, 24)).columns if sys.stdout.isatty() else HELP_WIDTH
    lines = [short_usage(parser), ""]
    if parser.description:
        lines += [plain(parser.description), ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)]
        subs = [a for a in group._group_actions if isinstance(a, argparse._SubParsersAction)]
        if not actions and not subs:
            continue
        title = {"positional arguments": "arguments", "options": "options"}.get(group.title or "", group.title or "")
        lines.append(_cut(f"{title}:", width))
        for a in actions:
            lines.append(_cut(f"  {_invocation(a):<28} {_summary(a.help)}", width))
        for sub in subs:
            for choice in sub._choices_actions:
                lines.append(_cut(f"  {choice.dest:<28} {_summary(choice.help)}", width))
        lines.append("")
        if group.title == "options":  # the common options, then a command's own sections (train: the objectives)
            for title, rows in getattr(parser, "short_sections", ()):
                lines.append(f"{title}:")
                lines += [_cut(f"  {name:<28} {plain(text)}", width) for name, text in rows]
                lines.append("")
    prog = parser.prog
    if prog != "dpipe":
        lines.append("-v / -q (more or fewer log lines) may stand before or after the command.")
    lines.append(f"{prog} --help-all: every option with its whole text." + (" Objectives and options: docs/training.md." if prog == "dpipe train" else ""))
    return "\n".join(lines) + "\n"


def short_usage(parser: argparse.ArgumentParser) -> str:
    """``usage: dpipe train STORE --out OUT [options]``: the positionals and the required options only."""
    parts = [parser.prog]
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            parts.append(a.metavar if isinstance(a, argparse.Action) and isinstance(a.metavar, str) else "COMMAND")
        elif not a.option_strings:
            parts.append(_invocation(a) + (" ..." if a.nargs in ("*", "+") else ""))
        elif a.required:
            parts.append(_invocation(a))
    return "usage: " + " ".join(parts) + " [options]"


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 3].rstrip() + "..."


class _ShortHelp(argparse.Action):
    """``-h`` / ``--help``: :func:`short_help`."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(short_help(parser))
        parser.exit()


class _FullHelp(_ShortHelp):
    """``--help-all``: argparse's help of every option, without markup."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(plain(parser.format_help()))
        parser.exit()


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: ``-h`` / ``--help`` short (:func:`short_help`), ``--help-all`` whole, and a usage error as one
    line ``dpipe COMMAND: error: ... (see dpipe COMMAND --help)`` with exit status :data:`EXIT_USAGE`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["add_help"] = False
        kwargs.setdefault("formatter_class", _PlainFormatter)
        super().__init__(*args, **kwargs)
        self.add_argument("-h", "--help", action=_ShortHelp, help="this help: the common options, one line each")
        self.add_argument("--help-all", action=_FullHelp, help="every option with its whole text")

    def format_usage(self) -> str:
        return short_usage(self) + "\n"

    def format_help(self) -> str:
        return short_usage(self) + "\n" + super().format_help()

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _PlainFormatter(argparse.HelpFormatter):
    """argparse's help with the short usage line."""

    def _format_usage(self, usage: str | None, actions: Any, groups: Any, prefix: str | None) -> str:
        return ""


def _add_global_options(p: argparse.ArgumentParser) -> None:
    """``-v`` and ``-q``: accepted before the command and after it (:class:`_Parser`)."""
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="more log lines and tracebacks (-v: details such as the dashboard link; -vv: debug, incl. bytes moved per pass); "
                        "before or after COMMAND")
    p.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only; before or after COMMAND")


def _global_options_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpipe", add_help=False)
    _add_global_options(p)
    return p


class _Parser(_CommandParser):
    """The ``dpipe`` parser: the global options (``-v``, ``-q``) may also follow the command, as users type them
    (``dpipe train STORE --out m.json -q``).

    The sub-commands' parsers leave an option they do not know among the extras; this parser
    reads ``-v`` / ``-q`` from those, counting each ``-v`` wherever it is, and leaves the rest
    to be reported as unrecognized. The sub-commands do not declare the options themselves
    (their defaults would overwrite what was given before the command).
    """

    def parse_known_args(  # type: ignore[override]  # argparse's overloads (a namespace of any class) narrowed to Namespace
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            parsed, extras = _global_options_parser().parse_known_args(extras, parsed)
        return parsed, extras

    def parse_args(self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None) -> argparse.Namespace:  # type: ignore[override]
        """As argparse's, with a hint for ``evaluate --json FILE``: ``--json`` is a flag now, the metrics file is ``--out FILE``."""
        argv = list(sys.argv[1:] if args is None else args)
        namespace, extras = self.parse_known_args(argv, namespace)
        if extras:
            hint = ""
            if getattr(namespace, "command", None) == "evaluate" and "--json" in argv:
                hint = ("; evaluate's --json is a flag now and takes no file (it prints the metrics document on stdout): "
                        "write the metrics file with --out FILE")
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return namespace


#: what each command's ``--json`` prints, for its help (the fields: docs/json-output.md)
_JSON_HELP = {
    "ingest": "the new store's summary", "split": "both stores' summaries", "make-data": "the new store's summary",
    "train": "the model file's path and the fit's summary", "evaluate": "the metrics document instead of the table",
    "predict": "the prediction file's path and rows", "demo": "each model's test metrics and the report's path",
    "verify": "the store's result: ok or its damaged shards",
    "datasets": "the files written",
}


def _ingest_parser(sub: Any) -> None:
    """``dpipe ingest``."""
    from ..io._ingest_options import add_ingest_arguments

    p = sub.add_parser("ingest", help="write a source file (svmlight, CSV, Parquet) into a sharded store")
    p.add_argument("src", help="source file (plain, .gz or .bz2) or Parquet file/folder")
    p.add_argument("dest", help="store to create")
    p.add_argument("--overwrite", action="store_true", help="replace an existing DEST (only a dpipe store is ever replaced)")
    add_ingest_arguments(p, "ingest")


def _split_parser(sub: Any) -> None:
    """``dpipe split``."""
    from ..io._ingest_options import add_ingest_arguments

    p = sub.add_parser("split", help="split a store into a training and a test store (optionally with a transform fitted on the training part)")
    p.add_argument("store")
    p.add_argument("train", help="training store to create")
    p.add_argument("test", help="test store to create")
    p.add_argument("--fraction", type=float, default=0.75, help="share of the rows in the training store (default 0.75)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--method", choices=("permutation", "bernoulli"), default="permutation",
                   help="permutation (default): rows RandomState(seed).permutation(n)[:int(fraction n)] train; bernoulli: each row "
                        "independently, O(shard) memory")
    p.add_argument("--overwrite", action="store_true", help="replace existing stores (only dpipe stores are ever replaced)")
    add_ingest_arguments(p, "split")


def _info_parser(sub: Any) -> None:
    """``dpipe info``."""
    p = sub.add_parser("info", help="print a store's manifest summary, or a model file's fit summary")
    p.add_argument("store", help="a store, or a model file (dpipe train --out)")
    p.add_argument("--json", action="store_true", help="print the whole manifest (a store) or the model's fit summary (a model) as JSON (docs/json-output.md)")


def _make_data_parser(sub: Any) -> None:
    """``dpipe make-data``."""
    from ..io._ingest_options import add_ingest_arguments

    p = sub.add_parser("make-data", help="write a synthetic store (binary, heavy-tailed and Gaussian features, label noise, groups)")
    p.add_argument("dest")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--features", type=int, default=40)
    p.add_argument("--positive-rate", dest="positive_rate", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled rows")
    p.add_argument("--model-seed", dest="model_seed", type=int, default=0, help="seed of the true model (same value: train and test share it)")
    p.add_argument("--label-noise", dest="label_noise", type=float, default=0.02)
    p.add_argument("--groups", dest="n_groups", type=int, default=2)
    p.add_argument("--overwrite", action="store_true")
    add_ingest_arguments(p, "make-data")


#: the STORE argument of train, evaluate and predict
_STORE_HELP = ("a store, or a source file (svmlight, CSV, Parquet; plain, .gz or .bz2) ingested into a store cached by its content and "
               "the ingest options (dask config dpipe.ingest-cache) and reused by later runs")
#: the title of their ingest options' group
_INGEST_GROUP = "ingest options (when STORE is a source file)"
_INGEST_ABOUT = "evaluate and predict ingest a source file --like the model's training store unless --like is given"


def _train_parser(sub: Any) -> None:
    """``dpipe train``."""
    from ..engine._cluster_spec import add_cluster_arguments
    from ..fit._params import add_arguments, param_groups
    from ..fit._registry import DEFAULT_OBJECTIVE, OBJECTIVES
    from ..io._ingest_options import add_ingest_arguments

    p = sub.add_parser("train", help="train a model on a store (or a source file, ingested once into a cached store)")
    p.add_argument("store", help=_STORE_HELP)
    p.add_argument("--objective", choices=list(OBJECTIVES), default=DEFAULT_OBJECTIVE, metavar="NAME",
                   help=f"the measure to optimize (default {DEFAULT_OBJECTIVE}; the objectives below). " + "; ".join(f"{o.name}: {o.summary}" for o in OBJECTIVES.values()))
    p.short_sections = [("objectives (--objective NAME; docs/training.md)", [(o.name, o.summary) for o in OBJECTIVES.values()])]  # read by short_help
    p.add_argument("--out", required=True, help="model file to write (JSON); '-': the model on stdout (then not with --json)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out (only a dpipe model file is ever replaced)")
    p.add_argument("--validation", help="iterative objectives: store whose exact AUC and PRBEP are measured after every iteration "
                   "(and which --early-stopping-rounds watches)")
    p.add_argument("--dataset", dest="datasets", action="append", metavar="ALIAS=STORE", default=None,
                   help="rate objectives: another store the constraints name by alias (on=ALIAS), e.g. unlabeled=pool.zarr; repeatable")
    p.add_argument("--constraints-file", dest="constraints_file", metavar="FILE",
                   help="rate objectives: a YAML or JSON list of constraint strings (added to any --constraint)")
    p.add_argument("--constraint-validation", dest="constraint_validation", action="append", metavar="[ALIAS=]STORE", default=None,
                   help="rate objectives: the validation rule: the exact threshold meets the constraints on this store's rows (ALIAS=STORE "
                        "for a --dataset's); the direction is fitted on the training stores; repeatable (see --validation-fraction)")
    for title, names in param_groups():  # an option that does not apply to the objective is an error
        add_arguments(p.add_argument_group(title), names)
    p.add_argument("--no-train-metrics", dest="train_metrics", action="store_false", help="do not keep training metrics in the model")
    p.add_argument("--plot", metavar="PNG", help="with --lam auto: a PNG of the path, the held-out measure per lam (each fold's and "
                   "their mean), the chosen and the fixed default lam marked (--overwrite replaces a plot dpipe wrote)")
    add_cluster_arguments(p, "train")
    add_ingest_arguments(p.add_argument_group(_INGEST_GROUP, _INGEST_ABOUT), "train")


def _evaluate_parser(sub: Any) -> None:
    """``dpipe evaluate``."""
    from ..engine._cluster_spec import add_cluster_arguments
    from ..io._ingest_options import add_ingest_arguments

    p = sub.add_parser("evaluate", help="exact ROC-AUC, PRBEP, accuracy, precision, recall, F1, Prec@k, Rec@k of a model on a store")
    p.add_argument("model")
    p.add_argument("store", help=_STORE_HELP)
    p.add_argument("--k", type=float, help="Prec@k / Rec@k cut-off: a number of rows (total weight in a weighted store); default the number of positives")
    p.add_argument("--k-fraction", dest="k_fraction", type=float, help="Prec@k / Rec@k cut-off as a fraction of the positives (as in training)")
    p.add_argument("--threshold", type=float, default=0.0)
    p.add_argument("--out", metavar="FILE", help="also write the metrics to this JSON file (marked \"format\": \"dpipe-metrics\"); "
                   "'-': that document on stdout instead of the table, as --json prints it")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file (only one dpipe wrote)")
    p.add_argument("--by-group", dest="by_group", action="store_true",
                   help="also the positive, true-positive, false-positive and error rates of every group, the selection-rate ratio and the TPR / FPR gaps")
    p.add_argument("--constraint", dest="constraints", action="append", metavar="CONSTRAINT",
                   help="also evaluate this rate constraint with the model's predictions and say whether it holds; repeatable")
    p.add_argument("--dataset", dest="datasets", action="append", metavar="ALIAS=STORE", help="another store the constraints name (on=ALIAS); repeatable")
    add_cluster_arguments(p, "evaluate")
    add_ingest_arguments(p.add_argument_group(_INGEST_GROUP, _INGEST_ABOUT), "evaluate")


def _predict_parser(sub: Any) -> None:
    """``dpipe predict``."""
    from ..engine._cluster_spec import add_cluster_arguments
    from ..io._ingest_options import add_ingest_arguments

    p = sub.add_parser("predict", help="score every row of a store into a Parquet file (row, score, label, y)")
    p.add_argument("model")
    p.add_argument("store", help=_STORE_HELP)
    p.add_argument("--out", required=True, help="Parquet file to write; '-': the file on stdout (a pipe or a redirection, not a terminal; then not with --json)")
    p.add_argument("--threshold", type=float, default=0.0)
    p.add_argument("--seed", type=int, help="a randomized model's labels are drawn from this seed (threshold_rule randomized)")
    p.add_argument("--overwrite", action="store_true")
    add_cluster_arguments(p, "predict")
    add_ingest_arguments(p.add_argument_group(_INGEST_GROUP, _INGEST_ABOUT), "predict")


def _demo_parser(sub: Any) -> None:
    """``dpipe demo``."""
    from ..engine._cluster_spec import add_cluster_arguments
    from ..io._ingest_options import add_ingest_arguments

    p = sub.add_parser("demo", help="train models that optimize different measures (ROC-AUC, F1, the error rate under the 80 %% rule between "
                                    "groups, the false-negative rate under a false-positive bound) on adult from the shared data folder "
                                    "(else generated data, or --data), evaluate them, write a report and a plot")
    p.add_argument("--workdir", help="folder for stores, models and the report (default: a new temporary folder)")
    p.add_argument("--generated", action="store_true", help="generated data even when the shared data folder holds adult")
    p.add_argument("--rows", type=int, help="rows of the generated training store (default 50000; implies --generated)")
    p.add_argument("--features", type=int, help="features of the generated stores (default 40; implies --generated)")
    p.add_argument("--data", help="your own training file instead of adult or generated data")
    p.add_argument("--test-data", dest="test_data", help="test file for --data (default: a random 25%% split of --data)")
    p.add_argument("--overwrite", action="store_true", help="replace the outputs of an earlier demo in --workdir (only files dpipe wrote)")
    add_ingest_arguments(p, "demo")
    add_cluster_arguments(p, "demo")


def _datasets_parser(sub: Any) -> None:
    """``dpipe datasets``."""
    from ..io._bundled import BUNDLED

    p = sub.add_parser("datasets", help="write bundled datasets as the files the examples use (adult.csv, a9a.svm, ...)",
                       description="Write bundled datasets into the working folder (or --dir) from the shared data folder "
                                   "($DPIPE_SHARED_DATA, else ../shared/data): "
                                   + "; ".join(f"{b.name}: {', '.join(f for f, _ in b.files)} ({b.about})" for b in BUNDLED.values())
                                   + ". A file that already holds the same content is left as it is.")
    p.add_argument("names", nargs="*", metavar="NAME", default=["adult", "a9a"], help=f"{', '.join(BUNDLED)} (default: adult a9a)")
    p.add_argument("--dir", default=".", help="folder to write into (default: the working folder)")
    p.add_argument("--from", dest="source", metavar="FOLDER", help="the shared data folder (default: $DPIPE_SHARED_DATA, else ../shared/data)")
    p.add_argument("--overwrite", action="store_true", help="replace a file of the same name whose content differs")


def _verify_parser(sub: Any) -> None:
    """``dpipe verify``."""
    p = sub.add_parser("verify", help="read every shard of a store and check it against the checksums in its manifest (exit 0 ok, 1 damaged)")
    p.add_argument("store")
    p.add_argument("--record", action="store_true", help="compute and record checksums for a store written without them (dpipe <= 0.1)")


#: command -> the function that adds its parser (the registry's commands: :mod:`._registry_commands`)
COMMAND_PARSERS = {
    "ingest": _ingest_parser,
    "split": _split_parser,
    "info": _info_parser,
    "make-data": _make_data_parser,
    "train": _train_parser,
    "evaluate": _evaluate_parser,
    "predict": _predict_parser,
    "demo": _demo_parser,
    "verify": _verify_parser,
    "datasets": _datasets_parser,
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``dpipe`` command."""
    from .._version import __version__

    parser = _Parser(prog="dpipe", description="Train linear classifiers that optimize the measure you care about, on sharded data, with dask.")
    parser.add_argument("--version", action="version", version=f"dpipe {__version__}")
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser, prog="dpipe")
    for add_parser in COMMAND_PARSERS.values():
        add_parser(sub)
    _add_registry_parsers(sub)
    for name in ("train", "evaluate", "predict", "demo", "split", "retrain"):  # every command that reads a store's shards
        sub.choices[name].add_argument("--verify", action=argparse.BooleanOptionalAction, default=None,
                                       help="re-hash every shard read and compare it with the checksums recorded at write time: the default "
                                            "(dask config dpipe.verify: auto); --no-verify skips it; --verify also refuses a store written "
                                            "without checksums, which the default reads with a warning")
    for name, p in sub.choices.items():
        if name not in ("info", "retrain", "registry"):  # info's and retrain's --json came first; the registry's verbs each take it
            p.add_argument("--json", action="store_true", help=f"print one JSON document on stdout ({_JSON_HELP.get(name, 'its result')}; fields: "
                                                                "docs/json-output.md); logs and progress stay on stderr")
        p.epilog = "-v / -q (more or fewer log lines) may be given after the command too."
    return parser
