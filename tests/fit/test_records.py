"""The typed parameter records (dpipe/fit/_records.py) are what the generator makes of PARAMS today, and resolve builds them."""

from __future__ import annotations

import dataclasses
import types
import typing

import pytest

from dpipe.fit import OBJECTIVES, PARAMS
from dpipe.fit._codegen import RECORDS_PATH, records_source
from dpipe.fit._params import record_fields, resolve
from dpipe.fit._records import RECORDS
from dpipe.fit._registry import FAMILIES


def test_the_checked_in_records_are_the_generators_output():
    assert RECORDS_PATH.read_text() == records_source(), "run: python -m dpipe.fit._codegen"


@pytest.mark.parametrize("family", FAMILIES)
def test_each_record_holds_its_familys_parameters_in_declaration_order(family):
    record = RECORDS[family]
    names = [f.name for f in dataclasses.fields(record)]
    assert names == ["objective", *record_fields(family), "given", "owner"]
    assert set(names) - {"objective", "given", "owner"} <= set(PARAMS)


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_resolve_builds_the_record_and_its_types_hold(objective):
    spec = OBJECTIVES[objective]
    p = resolve(objective, {}, "train")
    record = RECORDS[spec.family]
    assert type(p) is record and p.objective == objective and p.given == () and p.owner == "train"
    hints = typing.get_type_hints(record)
    for f in dataclasses.fields(record):
        value = getattr(p, f.name)
        hint = hints[f.name]
        allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)  # X | None -> (X, NoneType)
        allowed = tuple(typing.get_origin(a) or a for a in allowed)  # tuple[str, ...] -> tuple
        if float in allowed:
            allowed += (int,)  # an int default where a float is declared (PEP 484's numeric tower)
        assert isinstance(value, allowed), f"{objective}: {f.name} = {value!r} is not {hint}"


def test_the_public_signatures_are_the_generators_output_and_list_every_parameter():
    import inspect

    import dpipe
    from dpipe.fit._codegen import SIGNATURE_FILES, with_signature

    for path, indent in SIGNATURE_FILES.items():
        assert path.read_text() == with_signature(path.read_text(), indent), f"{path}: run python -m dpipe.fit._codegen"
    for function in (dpipe.train, dpipe.DPipeClassifier.__init__):
        params = inspect.signature(function).parameters
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())  # written out, no **params
        assert all(params[name].kind is inspect.Parameter.KEYWORD_ONLY and params[name].default is None for name in PARAMS)
    with pytest.raises(TypeError, match="unexpected keyword argument 'lamm'"):
        dpipe.DPipeClassifier(lamm=1.0)
    assert dpipe.DPipeClassifier(lam=0.5).get_params()["lam"] == 0.5  # scikit-learn reads the written-out signature
