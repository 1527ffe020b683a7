"""deploy/Dockerfile, deploy/entrypoint.sh and deploy/compose.yaml, checked offline.

No Docker engine runs here: the Dockerfile is parsed (dockerfile-parse) and its invariants
checked, the entry point is run for real with this environment's ``dask`` and ``dpipe``, the
Compose file's commands are parsed by dask's and dpipe's own command-line parsers, and
``docker compose config`` (or Compose v1's ``docker-compose config``, which needs no engine
either) validates the file when a Compose is installed.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from dpipe.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
ENV_BIN = os.path.dirname(sys.executable)


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    return DockerfileParser(path=str(DEPLOY / "Dockerfile"))


def _final_stage(parser: DockerfileParser) -> list[dict[str, Any]]:
    starts = [i for i, ins in enumerate(parser.structure) if ins["instruction"] == "FROM"]
    return parser.structure[starts[-1]:]


def _instructions(stage: list[dict[str, Any]], name: str) -> list[str]:
    return [ins["value"] for ins in stage if ins["instruction"] == name]


def test_image_runs_as_an_unprivileged_user(dockerfile):
    final = _final_stage(dockerfile)
    (user,) = _instructions(final, "USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) >= 1000  # numeric, so Kubernetes' runAsNonRoot can check it
    runs = " ".join(_instructions(final, "RUN"))
    assert f"--uid {uid}" in runs
    assert _instructions(final, "WORKDIR")[-1] == "/data"
    assert "chown dpipe:dpipe /data" in runs


def test_entrypoint_is_exec_form_through_tini(dockerfile):
    final = _final_stage(dockerfile)
    (entrypoint,) = _instructions(final, "ENTRYPOINT")
    argv = json.loads(entrypoint)
    assert argv == ["/usr/bin/tini", "--", "/usr/local/bin/dpipe-entrypoint"]
    copies = _instructions(final, "COPY")
    assert any(c.split()[-2:] == ["deploy/entrypoint.sh", "/usr/local/bin/dpipe-entrypoint"] and "--chmod=0755" in c for c in copies)
    assert json.loads(_instructions(final, "CMD")[0]) == ["dpipe", "--help"]
    assert set(_instructions(final, "EXPOSE")[0].split()) == {"8786", "8787"}


def test_installs_dpipe_with_extras_that_exist(dockerfile):
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    declared = {ins["value"].split("=", 1)[1] for ins in dockerfile.structure if ins["instruction"] == "ARG" and ins["value"].startswith("DPIPE_EXTRAS=")}
    assert declared and all(set(value.split(",")) <= set(extras) for value in declared)
    final_runs = " ".join(_instructions(_final_stage(dockerfile), "RUN"))
    assert '"dpipe[${DPIPE_EXTRAS}]"' in final_runs and "--no-index" in final_runs
    assert len(set(dockerfile.parent_images)) == 1  # build and final stage on the same Python


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins ("!" re-includes)."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        p = (pattern[1:] if negate else pattern).rstrip("/")
        if fnmatch.fnmatch(path, p) or path.startswith(p + "/"):  # fnmatch's * also matches "/", as ** does
            ignored = not negate
    return ignored


def test_every_copied_source_exists_and_is_in_the_build_context(dockerfile):
    patterns = [s.strip() for s in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines() if s.strip() and not s.startswith("#")]
    sources = []
    for ins in dockerfile.structure:
        if ins["instruction"] != "COPY" or "--from=" in ins["value"]:
            continue
        words = [w for w in ins["value"].split() if not w.startswith("--")]
        sources += words[:-1]
    assert sources
    for src in sources:
        assert (REPO / src).exists(), src
        assert not _ignored(src.rstrip("/"), patterns), f"{src} is excluded by Dockerfile.dockerignore"
    assert _ignored("bench/results", patterns) and _ignored("dpipe/__pycache__", patterns)


def _entrypoint(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=ENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    return subprocess.run(["sh", str(DEPLOY / "entrypoint.sh"), *args], capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("args,expected", [
    (("scheduler", "--help"), "Usage: dask scheduler"),
    (("worker", "--help"), "Usage: dask worker"),
    (("train", "--help"), "usage: dpipe train"),
    (("dpipe", "--version"), "dpipe"),
    (("python", "-c", "print('as given')"), "as given"),
])
def test_entrypoint_roles(args, expected):
    run = _entrypoint(*args)
    assert run.returncode == 0, run.stderr
    assert expected in run.stdout


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _interpolate(value: Any) -> Any:
    """Compose's ${VAR:-default} with the defaults (the variables unset)."""
    if isinstance(value, str):
        return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}", r"\1", value)
    if isinstance(value, list):
        return [_interpolate(v) for v in value]
    if isinstance(value, dict):
        return {k: _interpolate(v) for k, v in value.items()}
    return value


def test_compose_services_share_the_image_and_the_volume(compose):
    services = _interpolate(compose["services"])
    assert set(services) == {"scheduler", "worker", "train"}
    assert {s["image"] for s in services.values()} == {"dpipe:latest"}
    assert services["scheduler"]["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    for s in services.values():
        assert "dpipe-data:/data" in s["volumes"]
    assert "dpipe-data" in compose["volumes"]
    assert int(services["worker"]["deploy"]["replicas"]) == 2
    assert compose["services"]["worker"]["deploy"]["replicas"] == "${DPIPE_WORKERS:-2}"
    assert services["train"]["profiles"] == ["job"]
    assert services["scheduler"]["ports"] == ["127.0.0.1:8787:8787"]  # the dashboard on loopback; 8786 stays on the project network
    compile(services["scheduler"]["healthcheck"]["test"][-1], "healthcheck", "exec")


def test_compose_commands_parse(compose):
    from distributed.cli.dask_scheduler import main as scheduler_main
    from distributed.cli.dask_worker import main as worker_main

    services = _interpolate(compose["services"])
    role, *args = services["scheduler"]["command"]
    assert role == "scheduler"
    scheduler_main.make_context("dask scheduler", args).close()
    role, *args = services["worker"]["command"]
    assert role == "worker"
    ctx = worker_main.make_context("dask worker", args)
    assert ctx.params["scheduler"] == "tcp://scheduler:8786"
    ctx.close()
    a = build_parser().parse_args(services["train"]["command"])
    assert (a.command, a.scheduler) == ("train", "tcp://scheduler:8786")
    assert a.store.startswith("/data/") and a.out.startswith("/data/")


def _compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=60, check=False).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_docker_compose_config_accepts_the_file(tmp_path):
    command = _compose_command()
    if command is None:
        pytest.skip("neither 'docker compose' nor 'docker-compose' is installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPIPE_", "COMPOSE_"))}
    env["DPIPE_WORKERS"] = "3"
    run = subprocess.run([*command, "-f", str(DEPLOY / "compose.yaml"), "config"], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    resolved = yaml.safe_load(run.stdout)
    assert int(resolved["services"]["worker"]["deploy"]["replicas"]) == 3
    assert resolved["volumes"]["dpipe-data"]["name"] == "dpipe-data"
