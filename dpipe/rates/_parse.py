"""Constraint strings, as typed on the command line: ``"positive_rate(group=Female) >= 0.8 * positive_rate(group=Male)"``.

The string is parsed by Python's own parser (:mod:`ast`, no evaluation) and only these
shapes are accepted: numbers, the rates of :data:`~dpipe.rates._expr.RATES` called with
keyword arguments (``on=``, ``group=``, ``label=``; ``churn`` takes the deployed model's
path first), ``+ - * /`` with numbers, and one comparison ``<=`` or ``>=``.
The ratios of :data:`~dpipe.rates._expr.RATIOS` (``precision(...) >= p``, ``f1(...) >= p``) are multiplied out. Group values and
store aliases may be written bare (``group=Female``) or quoted (``group="Self-emp"``);
a model path with a ``/`` must be quoted.
"""

from __future__ import annotations

import ast
from typing import Any

from ..exceptions import ParameterError
from ._expr import RATES, RATIOS, Constraint, RateExpression

__all__ = ["check_constraints", "parse_constraint", "parse_objective"]

_LABELS = {"1": 1, "+1": 1, "-1": -1, "positive": 1, "negative": -1, "pos": 1, "neg": -1}


class _Bad(Exception):
    pass


def _name(node: ast.expr) -> str:
    """A bare word, dotted name, string or number written as an argument value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)) and not isinstance(node.value, bool):
        return str(node.value)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(node.operand, ast.Constant):
        return ("-" if isinstance(node.op, ast.USub) else "+") + str(node.operand.value)
    raise _Bad(f"{ast.unparse(node)!r} is not a name, path or number (quote it)")


def _call_kwargs(node: ast.Call, fname: str) -> tuple[list[str], dict[str, Any]]:
    args = [_name(a) for a in node.args]
    kwargs: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise _Bad(f"{fname}: ** arguments are not allowed")
        value = _name(kw.value)
        if kw.arg == "label":
            if value not in _LABELS:
                raise _Bad(f"{fname}: label must be +1, -1, positive or negative, got {value!r}")
            kwargs["label"] = _LABELS[value]
        elif kw.arg in ("group", "on"):
            kwargs[kw.arg] = value
        else:
            raise _Bad(f"{fname}: unknown argument {kw.arg!r} (takes on=, group=" + (", label=)" if fname in ("positive_rate", "negative_rate", "coverage") else ")"))
    return args, kwargs


def _rate(node: ast.Call) -> RateExpression:
    if not isinstance(node.func, ast.Name):
        raise _Bad(f"{ast.unparse(node.func)!r} is not a rate")
    fname = node.func.id
    if fname in RATIOS:
        raise _Bad(f"{fname}(...) is a ratio: write it alone, compared with a number ({fname}(...) >= 0.8)")
    if fname not in RATES:
        raise _Bad(f"unknown rate {fname!r}; known: {', '.join(sorted(RATES))}, and precision / f1 compared with a number")
    args, kwargs = _call_kwargs(node, fname)
    if fname == "churn":
        if len(args) != 1:
            raise _Bad("churn takes the deployed model's path first: churn(deployed.json, on=pool)")
        return RATES[fname](args[0], **kwargs)
    if args:
        raise _Bad(f"{fname} takes keyword arguments only (on=, group=, ...), got {', '.join(args)}")
    try:
        return RATES[fname](**kwargs)
    except TypeError as error:
        raise _Bad(f"{fname}: {error}") from None


def _expression(node: ast.expr) -> RateExpression | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Call):
        return _rate(node)
    if isinstance(node, ast.Name):  # a rate on the whole training store: "recall >= 0.9"
        return _rate(ast.Call(func=node, args=[], keywords=[]))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _expression(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left, right = _expression(node.left), _expression(node.right)
        try:
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            return left / right  # type: ignore[operator]  # a number / a rate raises the TypeError reported below
        except (TypeError, ZeroDivisionError) as error:
            raise _Bad(str(error)) from None
    raise _Bad(f"{ast.unparse(node)!r} is not a rate, a number or a sum / multiple of them")


def _parse(text: str) -> ast.expr:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as error:
        raise _Bad(f"not an expression ({error.msg})") from None


def parse_constraint(text: str) -> Constraint:
    """The :class:`Constraint` a string states; :class:`ParameterError` naming it when it is malformed."""
    try:
        node = _parse(text)
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            raise _Bad("a constraint compares two sides with one <= or >=")
        op, left, right = node.ops[0], node.left, node.comparators[0]
        if not isinstance(op, (ast.LtE, ast.GtE)):
            raise _Bad(f"use <= or >= (rates are bounded, not strictly), not {ast.unparse(node).split(' ')[1]!r}")
        if isinstance(left, ast.Name) and left.id in RATIOS:
            left = ast.Call(func=left, args=[], keywords=[])
        if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id in RATIOS:
            bound = _expression(right)
            if not isinstance(op, ast.GtE) or not isinstance(bound, float):
                raise _Bad(f"{left.func.id}(...) is bounded below by a number: {left.func.id}(...) >= 0.8")
            _, kwargs = _call_kwargs(left, left.func.id)
            kwargs.pop("label", None)
            target = float(bound)
            if not 0.0 < target < 1.0:
                raise _Bad(f"{left.func.id} target must be in (0, 1), got {target:g}")
            return RATIOS[left.func.id](target, **kwargs).named(text.strip())
        lhs, rhs = _expression(left), _expression(right)
        if not isinstance(lhs, RateExpression) and not isinstance(rhs, RateExpression):
            raise _Bad("neither side names a rate")
        constraint = (lhs <= rhs) if isinstance(op, ast.LtE) else (lhs >= rhs)  # a number on the left: Python reflects it
        assert isinstance(constraint, Constraint)  # a rate on one side at least (checked above): never a bool
        return constraint.named(text.strip())
    except _Bad as error:
        raise ParameterError(f"constraint {text.strip()!r}: {error}") from None


def parse_objective(text: str) -> RateExpression:
    """A positive combination of rates to minimize, e.g. ``"false_negative_rate"`` or ``"error_rate + 0.5 * churn(old.json)"``."""
    try:
        value = _expression(_parse(text))
        if not isinstance(value, RateExpression):
            raise _Bad("an objective names at least one rate")
        return RateExpression(value.terms, value.constant, text.strip())
    except _Bad as error:
        raise ParameterError(f"rate objective {text.strip()!r}: {error}") from None


def check_constraints(value: Any, name: str, owner: str) -> tuple[Constraint, ...]:
    """A constraint string, a :class:`Constraint`, or a list of them, as a tuple of Constraints (``name`` / ``owner``: for errors)."""
    items = [value] if isinstance(value, (str, Constraint)) else value
    try:
        items = list(items)
    except TypeError:
        raise ParameterError(f"The {name!r} parameter of {owner} must be constraint strings or dpipe.rates.Constraint objects. Got {value!r} instead.") from None
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(parse_constraint(item))
        elif isinstance(item, Constraint):
            out.append(item)
        else:
            raise ParameterError(f"The {name!r} parameter of {owner} takes constraint strings or dpipe.rates.Constraint objects, not {type(item).__name__}.")
    return tuple(out)
