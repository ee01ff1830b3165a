"""What ships for containers, checked without building or running anything (README "Container
image"): the Containerfile's shape, the compose file, and the Kubernetes manifests, which no
cluster here runs, validated against the Kubernetes API schema (kubernetes-validate, strict:
an unknown field is an error), every fleet in them parsed by forewarn's own fleet parser,
and every ``FOREWARN_SERVE_*`` variable in them an option ``forewarn serve`` has.

The image itself is built and run by ``.ci/container`` (too slow for this suite); the
README's container blocks are run there, and found here by the same code.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import click
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from forewarn.cli.serve import ENVIRONMENT_PREFIX, serve
from forewarn.config.fleet import parse_fleet
from forewarn.defaults import DEFAULT_CONTROL_PORT, DEFAULT_PORT, LIVE_PATH, READY_PATH

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "Containerfile"
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
COMPOSE = ROOT / "deploy" / "compose.yaml"
#: The Kubernetes release whose API schema the manifests are checked against: the newest
#: the installed kubernetes-validate knows.
KUBERNETES = kubernetes_validate.latest_version()


def serve_variables() -> set[str]:
    """Every environment variable ``forewarn serve`` reads an option from."""
    names = set()
    for param in serve.params:
        if not isinstance(param, click.Option) or param.name is None:
            continue
        names.add(f"{ENVIRONMENT_PREFIX}_{param.name.upper()}")
        if isinstance(param.envvar, str):
            names.add(param.envvar)
    return names


# -- the Containerfile --------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", CONTAINERFILE.read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def test_the_containerfile_has_a_build_stage_and_a_final_stage_without_build_tools() -> None:
    instructions = _instructions()
    base = [rest for keyword, rest in instructions if keyword == "ARG" and rest.startswith("BASE=")]
    assert base == ["BASE=docker.io/library/python:3.12-slim"]  # what `docker build` uses
    stages = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    assert [instructions[i][1] for i in stages] == ["${BASE} AS build", "${BASE}"]
    final = instructions[stages[1] :]
    runs = " ".join(rest for keyword, rest in final if keyword == "RUN")
    assert "pip" not in runs
    assert "apt-get" not in runs
    assert ("COPY", "--from=build /opt/forewarn /opt/forewarn") in final
    build = " ".join(rest for keyword, rest in instructions[: stages[1]] if keyword == "RUN")
    assert "pip uninstall --yes pip setuptools" in build


def test_every_build_argument_has_a_default_so_a_plain_build_warns_of_nothing() -> None:
    # podman (buildah) warns 'missing "NAME" build argument' for an ARG with no default that
    # the command line does not give: a plain `podman build -t forewarn .` must not.
    arguments = [rest for keyword, rest in _instructions() if keyword == "ARG"]
    assert arguments
    assert [argument for argument in arguments if "=" not in argument] == []


def test_the_final_stage_runs_serve_as_a_numbered_non_root_user() -> None:
    final = dict(_instructions()[[k for k, _ in _instructions()].index("FROM", 1) :])
    assert final["USER"] == "${UID}:${UID}"
    uid = [rest for keyword, rest in _instructions() if rest.startswith("UID=")]
    assert uid == ["UID=10001"]
    assert final["ENTRYPOINT"] == '["forewarn", "serve"]'
    assert final["VOLUME"] == '["/data"]'
    assert final["EXPOSE"] == f"{DEFAULT_PORT} {DEFAULT_CONTROL_PORT}"
    assert final["HEALTHCHECK"].endswith('CMD ["forewarn", "health"]')
    assert final["STOPSIGNAL"] == "SIGTERM"


def test_the_images_environment_names_real_options_and_a_protected_control_api() -> None:
    final = dict(_instructions()[[k for k, _ in _instructions()].index("FROM", 1) :])
    env = dict(re.findall(r"(\w+)=(\S+)", final["ENV"]))
    known = serve_variables() | {"FOREWARN_CONTROL", "FOREWARN_RUNTIME_DIR"}
    assert {name for name in env if name.startswith("FOREWARN")} <= known
    assert env["FOREWARN_SERVE_BIND"] == f"0.0.0.0:{DEFAULT_PORT}"
    assert env["FOREWARN_SERVE_CONTROL"] == f"0.0.0.0:{DEFAULT_CONTROL_PORT}"
    assert env["FOREWARN_STORE"] == "sqlite:////data/forewarn.sqlite3"
    assert "FOREWARN_TOKEN" not in env  # each user chooses it; serve refuses to start without


def test_the_build_context_holds_what_the_containerfile_copies() -> None:
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = set()
    for keyword, rest in _instructions():
        if keyword == "COPY" and not rest.startswith("--from"):
            copied.update(rest.split()[:-1])
    assert copied == kept
    for path in copied:
        assert (ROOT / path).exists(), path


# -- Kubernetes -----------------------------------------------------------------------------


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def test_there_are_the_two_deployments() -> None:
    assert [path.name for path in MANIFESTS] == ["shared-fleet.yaml", "single-server.yaml"]


@pytest.mark.parametrize("path", MANIFESTS, ids=[path.name for path in MANIFESTS])
def test_each_manifest_validates_against_the_kubernetes_schema(path: Path) -> None:
    documents = _documents(path)
    assert documents
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)


def test_a_wrong_field_is_caught_by_the_validation() -> None:
    """The check can fail: a misspelt field of a probe is an error in strict mode."""
    (deployment,) = [
        d for d in _documents(MANIFESTS[1]) if d["kind"] == "Deployment"
    ]  # single-server.yaml
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)


@pytest.mark.parametrize("path", MANIFESTS, ids=[path.name for path in MANIFESTS])
def test_each_manifest_says_it_is_not_run_on_a_cluster(path: Path) -> None:
    assert "NOT RUN ON A CLUSTER" in path.read_text(encoding="utf-8")


def _workload(path: Path) -> dict[str, Any]:
    (workload,) = [d for d in _documents(path) if d["kind"] in ("Deployment", "DaemonSet")]
    return workload


@pytest.mark.parametrize("path", MANIFESTS, ids=[path.name for path in MANIFESTS])
def test_each_fleet_parses_and_each_variable_is_a_serve_option(path: Path) -> None:
    documents = _documents(path)
    (fleet_map,) = [d for d in documents if d["kind"] == "ConfigMap"]
    fleet = parse_fleet(fleet_map["data"]["fleet.yaml"], f"{path.name}: {fleet_map['kind']}")
    assert fleet.vms
    pod = _workload(path)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {item["name"]: item for item in container["env"]}
    known = serve_variables() | {"NODE_IP", "PGPASSWORD"}
    assert set(env) <= known
    assert env["FOREWARN_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "token"
    assert env["FOREWARN_SERVE_FLEET"]["value"] == "/etc/forewarn/fleet.yaml"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/forewarn"]]["configMap"]["name"] == fleet_map["metadata"]["name"]
    assert "/tmp" in mounts  # the root file system is read-only; serve writes its token there
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("path", MANIFESTS, ids=[path.name for path in MANIFESTS])
def test_readiness_is_readyz_on_the_control_port_and_liveness_livez(path: Path) -> None:
    """A store outage takes a front-end out of service; it must not restart it (the VMs it
    answers keep being answered meanwhile, docs/scale-out.md): readiness is ``/readyz``,
    liveness ``/livez``, which stays 200 through an outage (docs/control.md, "Health")."""
    (container,) = _workload(path)["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["control"] == DEFAULT_CONTROL_PORT
    assert container["readinessProbe"]["httpGet"] == {"path": READY_PATH, "port": "control"}
    assert container["readinessProbe"]["timeoutSeconds"] > 3  # the server's own bound
    assert container["livenessProbe"]["httpGet"] == {"path": LIVE_PATH, "port": "control"}


def test_the_shared_fleet_serves_azures_address_on_every_node_from_postgresql() -> None:
    path = MANIFESTS[0]
    workload = _workload(path)
    assert workload["kind"] == "DaemonSet"
    pod = workload["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    (init,) = pod["initContainers"]
    assert "169.254.169.254/32 dev lo" in " ".join(init["args"])
    (container,) = pod["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["FOREWARN_SERVE_BIND"] == "169.254.169.254:80"
    assert env["FOREWARN_STORE"].startswith("postgresql://")
    assert container["securityContext"]["capabilities"]["add"] == ["NET_BIND_SERVICE"]


def test_the_single_server_keeps_one_writer_on_its_volume() -> None:
    workload = _workload(MANIFESTS[1])
    assert workload["spec"]["replicas"] == 1
    assert workload["spec"]["strategy"] == {"type": "Recreate"}
    pod = workload["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["runAsNonRoot"] is True


# -- the compose file ---------------------------------------------------------------------


def test_the_compose_file_starts_the_handler_once_forewarn_is_healthy() -> None:
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    forewarn, handler = compose["services"]["forewarn"], compose["services"]["handler"]
    assert forewarn["build"] == {"context": "..", "dockerfile": "Containerfile"}
    assert set(forewarn["environment"]) <= serve_variables()
    assert forewarn["volumes"] == ["forewarn-data:/data"]
    assert handler["depends_on"] == {"forewarn": {"condition": "service_healthy"}}
    assert handler["environment"]["FOREWARN_IMDS_ENDPOINT"] == f"http://forewarn:{DEFAULT_PORT}"


# -- the README's container blocks ----------------------------------------------------------


def _smoke_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "container_smoke", ROOT / ".ci" / "container_smoke.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("container_smoke", module)
    spec.loader.exec_module(module)
    return module


def test_the_readme_blocks_ci_runs_are_the_container_ones() -> None:
    """The docs test skips them (no podman in the suite); .ci/container runs them as written."""
    blocks = _smoke_module().readme_container_blocks()
    text = "\n".join(block for _, block in blocks)
    assert len(blocks) >= 2
    assert "docker run" in text
    assert "podman run" in text
    assert "FOREWARN_TOKEN" in text
    assert "forewarn-data:/data" in text
