"""``dpipe datasets`` / :func:`dpipe.io._bundled.write_datasets`: the bundled datasets as the files the examples use."""

from __future__ import annotations

import gzip

import pandas as pd
import pytest

from dpipe.exceptions import OutputError, ParameterError
from dpipe.io._bundled import ADULT_COLUMNS, find_shared_data, write_datasets

ROW = "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, {sex}, 2174, 0, 40, United-States, {label}\n"


@pytest.fixture
def shared(tmp_path):
    """A shared data folder with adult's two files as published: padded fields, the test file's first line and labels ending in '.'."""
    d = tmp_path / "shared" / "data"
    d.mkdir(parents=True)
    with gzip.open(d / "adult.data.gz", "wt") as f:
        f.write(ROW.format(sex="Male", label="<=50K") + ROW.format(sex="Female", label=">50K") + "\n")
    with gzip.open(d / "adult.test.gz", "wt") as f:
        f.write("|1x3 Cross validator\n" + ROW.format(sex="Male", label=">50K.") + ROW.format(sex="Female", label="<=50K."))
    return d


def test_adult_gets_a_header_and_one_spelling_of_each_label(shared, tmp_path):
    done = write_datasets(["adult"], tmp_path / "out", source=shared)
    assert [state for _, state in done] == ["written", "written"]
    train, test = (pd.read_csv(tmp_path / "out" / name) for name in ("adult.csv", "adult-test.csv"))
    assert tuple(train.columns) == ADULT_COLUMNS and tuple(test.columns) == ADULT_COLUMNS
    assert list(train["income"]) == ["<=50K", ">50K"] and list(test["income"]) == [">50K", "<=50K"]
    assert list(test["sex"]) == ["Male", "Female"] and train["age"].dtype.kind == "i"  # the padding is gone, numbers parse


def test_a_second_run_keeps_identical_files_and_refuses_other_content(shared, tmp_path):
    write_datasets(["adult"], tmp_path, source=shared)
    assert [s for _, s in write_datasets(["adult"], tmp_path, source=shared)] == ["up to date", "up to date"]
    (tmp_path / "adult.csv").write_text("mine\n")
    with pytest.raises(OutputError, match="adult.csv exists with other content"):
        write_datasets(["adult"], tmp_path, source=shared)
    assert (tmp_path / "adult.csv").read_text() == "mine\n"
    assert [s for _, s in write_datasets(["adult"], tmp_path, source=shared, overwrite=True)] == ["replaced", "up to date"]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_the_shared_folder_is_found_by_the_environment_or_beside_the_working_folder(shared, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("DPIPE_SHARED_DATA", raising=False)
    assert find_shared_data() == str(shared)  # ../shared/data
    monkeypatch.chdir(tmp_path)
    assert find_shared_data() is None
    with pytest.raises(ParameterError, match="no shared data folder"):
        write_datasets(["adult"], tmp_path)
    monkeypatch.setenv("DPIPE_SHARED_DATA", str(shared))
    assert find_shared_data() == str(shared)
    with pytest.raises(ParameterError, match="no bundled dataset 'iris'"):
        write_datasets(["iris"], tmp_path)
