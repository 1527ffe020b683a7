"""Option sets declared once: a frozen dataclass whose fields carry what each option is.

The fit declares its hyper-parameters in ``dpipe.fit._params.PARAMS``; the option sets beyond the fit
(where the passes run: :class:`dpipe.engine.ClusterSpec`; how a source is read:
:class:`dpipe.io.IngestOptions`) are frozen dataclasses whose fields are made by
:func:`option`: the field's name is the Python keyword, its default the library's default,
and its :class:`Option` the documentation, the choices, the CLI flag and the commands that
take it. Everything else is built from the fields:

* :func:`add_arguments`: the CLI's options of one command, with that command's defaults;
* :func:`config_struct`: a msgspec Struct of the fields a configuration file may set
  (kebab-case names, unknown fields refused), decoded with the file's one-line errors;
* :func:`check_choices`: a decoded value outside its choices, as one line naming the field;
* :func:`keyword_defaults`: ``name -> default`` of the library keywords for one function,
  which tests compare with the public signatures.

This module imports nothing heavy: the CLI's parser reads the declarations.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

__all__ = ["Option", "option", "options_of", "add_arguments", "config_struct", "check_choices", "keyword_defaults", "flag_of"]


@dataclasses.dataclass(frozen=True)
class Option:
    """What one option is, beyond its name and default (those are the field's).

    Attributes
    ----------
    doc : str
        What it does (the numpydoc text and, unless ``help`` is given, the CLI help).
    choices : tuple
        Its valid values (empty: any of its type).
    commands : tuple of str
        The ``dpipe`` commands that take it as a flag (empty: none).
    defaults : mapping
        Defaults that differ from the field's, by command or function name (``evaluate``
        streams its shards: ``{"evaluate": "stream"}``).
    keyword : bool
        A keyword argument of the library functions (False: the CLI and configuration only).
    config : bool
        A field of the configuration file's section.
    parse : callable, optional
        The CLI's conversion of the flag's text (default: the text); ``"flag"``: a
        ``store_true`` switch.
    help : str
        The CLI help, when it says more (or less) than ``doc``.
    flag : str
        The CLI flag (default ``--name`` with dashes).
    metavar : str
        argparse's metavar.
    """

    doc: str
    choices: tuple[Any, ...] = ()
    commands: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    keyword: bool = True
    config: bool = True
    parse: Callable[[str], Any] | str | None = None
    help: str = ""
    flag: str = ""
    metavar: str | None = None


def option(default: Any, doc: str, **what: Any) -> Any:
    """A dataclass field of ``default`` declaring an :class:`Option` (``what``: its attributes)."""
    return dataclasses.field(default=default, metadata={"option": Option(doc, **what)})


def options_of(cls: type) -> dict[str, tuple[dataclasses.Field, Option]]:
    """``name -> (field, Option)`` of every declared option of ``cls``, in declaration order."""
    return {f.name: (f, f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata}


def flag_of(name: str, opt: Option) -> str:
    """The CLI flag of option ``name``."""
    return opt.flag or "--" + name.replace("_", "-")


def default_for(f: dataclasses.Field, opt: Option, owner: str) -> Any:
    """The option's default for command or function ``owner``."""
    return opt.defaults.get(owner, f.default)


def keyword_defaults(cls: type, owner: str) -> dict[str, Any]:
    """``name -> default`` of the options of ``cls`` that are keywords of the library function ``owner``."""
    return {name: default_for(f, opt, owner) for name, (f, opt) in options_of(cls).items() if opt.keyword}


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, command: str) -> None:
    """The flags of every option of ``cls`` that ``command`` takes, with ``command``'s defaults."""
    for name, (f, opt) in options_of(cls).items():
        if command not in opt.commands:
            continue
        default = default_for(f, opt, command)
        text = (opt.help or opt.doc).replace("%", "%%")
        kw: dict[str, Any] = {"dest": name, "default": default, "help": text}
        if opt.parse == "flag":
            kw["action"] = "store_true"
        else:
            if opt.parse is not None:
                kw["type"] = opt.parse
            if opt.choices:
                kw["choices"] = list(opt.choices)
            if default is not None and not opt.help:
                kw["help"] = f"{text} (default {default})"
        if opt.metavar:
            kw["metavar"] = opt.metavar
        parser.add_argument(flag_of(name, opt), **kw)


def config_struct(cls: type, name: str, *, exclude: tuple[str, ...] = (), rename: Literal["kebab"] | None = "kebab", doc: str = "") -> type:
    """A msgspec Struct of the options of ``cls`` a configuration file may set (``config`` and not in ``exclude``):
    their types and defaults, unknown fields refused, names in ``rename`` case. Its ``options()`` is the ``cls`` instance
    of its values."""
    import msgspec

    def options(self: Any) -> Any:
        return cls(**msgspec.structs.asdict(self))

    options.__doc__ = f"The :class:`{cls.__name__}` of these settings."
    hints = typing.get_type_hints(cls)
    fields = [(n, hints[n], f.default) for n, (f, opt) in options_of(cls).items() if opt.config and n not in exclude]
    return msgspec.defstruct(name, fields, kw_only=True, forbid_unknown_fields=True, rename=rename, module=cls.__module__,
                             namespace={"options": options, "__doc__": doc or f"The {cls.__name__} a configuration file sets."})


def check_choices(cls: type, values: Mapping[str, Any], where: str, rename: Callable[[str], str] = lambda n: n.replace("_", "-")) -> None:
    """A value of ``values`` (option name -> value; None: not given) outside its option's choices is a ParameterError naming
    ``where`` and the field (``rename``: its name in the file)."""
    from .exceptions import ParameterError

    for name, (_, opt) in options_of(cls).items():
        value = values.get(name)
        if opt.choices and value is not None and value not in opt.choices:
            raise ParameterError(f"{where}.{rename(name)} must be one of {', '.join(map(repr, opt.choices))}. Got {value!r} instead.")
