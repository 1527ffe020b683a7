"""deploy/kubernetes, checked offline: the built-in kinds against the Kubernetes API's schemas
(kubernetes-validate, strict: unknown fields are errors), the DaskCluster and DaskJob against
the dask-kubernetes operator's CRDs (jsonschema; vendored in tests/deploy/crds, see SOURCE.md),
and the commands the pods run against dpipe's and dask's own command-line parsers."""

from __future__ import annotations

import copy
import importlib.util
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from dpipe.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "kubernetes"
VENDORED_CRDS = Path(__file__).resolve().parent / "crds"
#: the Kubernetes versions validated against: CronJob.timeZone and podFailurePolicy are GA from 1.27 and 1.31
K8S_VERSIONS = ("1.31", "1.34")
CRD_KINDS = {"DaskCluster": "daskcluster.yaml", "DaskJob": "daskjob.yaml"}


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                out.append((path.name, doc))
    return out


MANIFESTS = _manifests()
BUILTIN = [(name, doc) for name, doc in MANIFESTS if doc["kind"] not in CRD_KINDS]
CUSTOM = [(name, doc) for name, doc in MANIFESTS if doc["kind"] in CRD_KINDS]


def _by_kind(kind: str) -> dict[str, Any]:
    (doc,) = [d for _, d in MANIFESTS if d["kind"] == kind]
    return doc


def _crd_file(name: str) -> Path:
    """The operator's own CRD when dask-kubernetes is installed, else the vendored copy."""
    spec = importlib.util.find_spec("dask_kubernetes")
    if spec is not None and spec.submodule_search_locations:
        installed = Path(next(iter(spec.submodule_search_locations))) / "operator" / "deployment" / "helm" / "dask-kubernetes-operator" / "crds" / name
        if installed.is_file():
            return installed
    return VENDORED_CRDS / name


def _strict(schema: Any) -> Any:
    """The schema with unknown fields refused, as the API server's strict field validation does.

    A structural CRD schema prunes unknown fields silently; jsonschema would accept them. Every
    object schema that lists its properties and says nothing about others gets
    ``additionalProperties: false`` (none of these CRDs preserves unknown fields).
    """
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _crd_validator(kind: str) -> jsonschema.Validator:
    crd = yaml.safe_load(_crd_file(CRD_KINDS[kind]).read_text())
    assert crd["spec"]["names"]["kind"] == kind
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = _strict(version["schema"]["openAPIV3Schema"])
    # apiVersion, kind and metadata are the API server's, not the CRD's
    schema.setdefault("properties", {}).update({"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}})
    return jsonschema.Draft7Validator(schema)


def test_every_manifest_is_listed_in_the_kustomization():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    # the one-off training run is applied on its own (kubectl apply -f daskjob-train.yaml)
    assert set(kustomization["resources"]) == files - {"daskjob-train.yaml"}
    assert {d["kind"] for _, d in MANIFESTS} == {"PersistentVolumeClaim", "ConfigMap", "NetworkPolicy", "DaskCluster", "DaskJob", "CronJob"}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("name,doc", BUILTIN, ids=[f"{n}:{d['kind']}" for n, d in BUILTIN])
def test_builtin_kinds_validate_against_the_kubernetes_schema(name, doc, version):
    assert kubernetes_validate.validate(doc, version, strict=True) == version


@pytest.mark.parametrize("name,doc", CUSTOM, ids=[f"{n}:{d['kind']}" for n, d in CUSTOM])
def test_dask_resources_validate_against_the_operator_crds(name, doc):
    assert doc["apiVersion"] == "kubernetes.dask.org/v1"
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in _crd_validator(doc["kind"]).iter_errors(doc)]
    assert errors == []


def test_the_crd_check_catches_a_misspelt_field_and_a_wrong_type():
    validator = _crd_validator("DaskCluster")
    bad = copy.deepcopy(_by_kind("DaskCluster"))
    bad["spec"]["worker"]["replica"] = bad["spec"]["worker"].pop("replicas")
    assert any("replica" in e.message for e in validator.iter_errors(bad))
    bad = copy.deepcopy(_by_kind("DaskCluster"))
    bad["spec"]["worker"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 1  # quantities are strings in this CRD
    assert list(validator.iter_errors(bad))


def _containers(pod_spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod_spec["containers"]}


def _expand(args: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion of a container's args."""
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env[m.group(1)], a) for a in args]


#: what the operator puts in the pods' environment
OPERATOR_ENV = {"DASK_SCHEDULER_ADDRESS": "tcp://dpipe-train-scheduler.default.svc.cluster.local:8786", "DASK_WORKER_NAME": "dpipe-train-default-worker-0"}


def _dask_cli_accepts(role: str, args: list[str]) -> None:
    """``dask scheduler|worker ARGS`` parses (click), without starting anything."""
    if role == "scheduler":
        from distributed.cli.dask_scheduler import main
    else:
        from distributed.cli.dask_worker import main
    ctx = main.make_context(f"dask {role}", list(args))
    ctx.close()


@pytest.mark.parametrize("kind", ["DaskCluster", "DaskJob"])
def test_dask_pods_run_valid_dask_commands_of_one_image(kind):
    doc = _by_kind(kind)
    cluster = doc["spec"] if kind == "DaskCluster" else doc["spec"]["cluster"]["spec"]
    images = set()
    for role in ("scheduler", "worker"):
        (container,) = cluster[role]["spec"]["containers"]
        images.add(container["image"])
        role_arg, *args = _expand(container["args"], OPERATOR_ENV)
        assert role_arg == role  # deploy/entrypoint.sh runs "dask <role> ARGS"
        _dask_cli_accepts(role, args)
    ports = {p["name"]: p["containerPort"] for p in cluster["scheduler"]["spec"]["containers"][0]["ports"]}
    assert ports == {"tcp-comm": 8786, "http-dashboard": 8787}
    assert cluster["scheduler"]["service"]["selector"]["dask.org/cluster-name"] == doc["metadata"]["name"]
    if kind == "DaskJob":
        job = _containers(doc["spec"]["job"]["spec"])["job"]
        images.add(job["image"])
        args = _expand(job["args"], OPERATOR_ENV)
        a = build_parser().parse_args(args)
        assert (a.command, a.scheduler) == ("train", OPERATOR_ENV["DASK_SCHEDULER_ADDRESS"])
        assert a.out.startswith("/data/") and a.store.startswith("/data/")
    assert len(images) == 1


def test_data_volume_is_the_pvc_everywhere():
    pvc = _by_kind("PersistentVolumeClaim")
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]
    pod_specs = [
        _by_kind("DaskCluster")["spec"]["worker"]["spec"],
        _by_kind("DaskJob")["spec"]["job"]["spec"],
        _by_kind("DaskJob")["spec"]["cluster"]["spec"]["worker"]["spec"],
        _by_kind("CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"],
    ]
    for spec in pod_specs:
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
        (container,) = spec["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert claims[mounts["/data"]] == pvc["metadata"]["name"]
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 10001


def _retrain_script() -> str:
    container = _containers(_by_kind("CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"])["retrain"]
    assert container["command"][-2:] == ["/bin/sh", "-c"]
    (script,) = container["args"]
    return script


def test_cronjob_runs_dpipe_retrain_weekly_on_the_configmap():
    cron = _by_kind("CronJob")
    assert cron["spec"]["schedule"].split()[2:] == ["*", "*", "1"]  # every Monday
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    config_volume = {v["name"]: v for v in pod["volumes"]}["config"]
    assert config_volume["configMap"]["name"] == _by_kind("ConfigMap")["metadata"]["name"]
    assert "retrain.yaml" in _by_kind("ConfigMap")["data"]
    (line,) = [s for s in _retrain_script().splitlines() if s.strip().startswith("dpipe ")]
    argv = shlex.split(line)[1:]
    assert argv == ["retrain", "/config/retrain.yaml"]
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices  # noqa: SLF001 - the sub-commands argparse knows
    if "retrain" not in commands:
        pytest.skip("this dpipe has no 'retrain' command yet")
    assert parser.parse_args(argv).config == "/config/retrain.yaml"


@pytest.mark.parametrize("status,expected", [(0, 0), (3, 0), (1, 1), (2, 2), (137, 137)])
def test_cronjob_maps_kept_to_success_and_keeps_other_exit_codes(status, expected):
    """dpipe retrain: 0 promoted, 3 kept (a normal week), 1 failed; the Job sees 0, 0, 1 (FailJob)."""
    script = _retrain_script().replace("dpipe retrain /config/retrain.yaml", f"(exit {status})")
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30, check=False)
    assert run.returncode == expected
    rules = _by_kind("CronJob")["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]
    fail_job = [r for r in rules if r["action"] == "FailJob"][0]["onExitCodes"]
    assert fail_job["containerName"] == "retrain" and 1 in fail_job["values"] and 3 not in fail_job["values"]


def test_retrain_config_in_the_configmap_loads(tmp_path):
    config = _by_kind("ConfigMap")["data"]["retrain.yaml"]
    raw = yaml.safe_load(config)
    assert raw["registry"].startswith("/data/") and all(p.startswith("/data/") for p in raw["data"].values() if isinstance(p, str))
    try:
        from dpipe.registry._config import load_config
    except ImportError:
        pytest.skip("this dpipe has no dpipe.registry (the retrain configuration's reader) yet")
    path = tmp_path / "retrain.yaml"
    path.write_text(config)
    cfg = load_config(path)
    assert cfg.registry == "/data/registry"
