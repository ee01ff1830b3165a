"""Smoke tests of the container image, run by ``.ci/container`` once it has built the image.

Each step does what a user of the image does (README "Container or CI", docs/container.md)
and checks what they would see: the image's shape, a VM's GET, the control API's token, the
HEALTHCHECK both ways, a clean stop on SIGTERM, a scenario run from the host, Azure's address
inside a network namespace, state in a volume across ``podman kill``, an OCI archive, and the
documented container blocks themselves. A failing step stops the run with what it saw (the
container's log included) and exit status 1; whatever a step started is removed
however the run ends.

    .venv/bin/python .ci/container_smoke.py --image localhost/forewarn:ci --work DIR
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
API_VERSION = "2020-07-01"
DOCUMENT = f"/metadata/scheduledevents?api-version={API_VERSION}"
#: The issue's target for the image; a dependency that grows it past this fails the run.
MAX_IMAGE_BYTES = 200_000_000
READY_TIMEOUT = 60.0
#: README blocks run here: the marker's reason names this script's caller.
README_MARKER = re.compile(r"<!--\s*snippet:\s*skip\b[^>]*\.ci/container runs this block\s*-->")
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
#: docs/verify.md's container block, run by :meth:`Smoke.verify_in_image`.
VERIFY_BLOCK = re.compile(
    r"<!--\s*snippet:\s*skip\b[^>]*\.ci/container runs this block\s*-->\n```sh\n(.*?)^```",
    re.S | re.M,
)


class SmokeError(AssertionError):
    """A step saw something a user of the image must not."""


def check(condition: object, message: str) -> None:
    if not condition:
        raise SmokeError(message)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Container:
    name: str
    vm_port: int | None
    control_port: int | None
    token: str

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    def document_response(self) -> httpx.Response:
        """A VM's GET, with the header every documented client sends."""
        return httpx.get(
            f"http://127.0.0.1:{self.vm_port}{DOCUMENT}",
            headers={"Metadata": "true"},
            timeout=10,
            trust_env=False,
        )

    def document(self) -> dict[str, Any]:
        response = self.document_response()
        check(response.status_code == 200, f"VM GET answered {response.status_code}")
        document: dict[str, Any] = response.json()
        return document

    def control(self, method: str, path: str, *, token: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token or self.token}"} if token != "" else {}
        return httpx.request(
            method, self.control_url + path, headers=headers, timeout=10, trust_env=False
        )


@dataclass
class Smoke:
    image: str
    work: Path
    suffix: str = field(default_factory=lambda: f"{os.getpid()}-{secrets.token_hex(2)}")
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    # -- running things -----------------------------------------------------------------

    def podman(
        self, *args: str, check_status: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if check_status and done.returncode != 0:
            raise SmokeError(f"podman {' '.join(args)}: {done.returncode}\n{done.stderr}")
        return done

    def name(self, what: str) -> str:
        return f"forewarn-ci-{what}-{self.suffix}"

    def run_container(
        self,
        what: str,
        *,
        publish: bool = True,
        options: tuple[str, ...] = (),
        args: tuple[str, ...] = (),
        wait: bool = True,
    ) -> Container:
        name = self.name(what)
        vm_port = control_port = None
        argv = ["run", "--detach", "--name", name, "--env", f"FOREWARN_TOKEN={self.token}"]
        if publish:
            vm_port, control_port = free_port(), free_port()
            argv += ["--publish", f"127.0.0.1:{vm_port}:16954"]
            argv += ["--publish", f"127.0.0.1:{control_port}:16955"]
        self.containers.append(name)
        self.podman(*argv, *options, self.image, *args)
        container = Container(name, vm_port, control_port, self.token)
        if wait and publish:
            self.wait_ready(container)
        return container

    def wait_ready(self, container: Container) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            try:
                if container.control("GET", "/healthz", token="").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.state(container.name) not in ("running", "created", "configured"):
                break
            time.sleep(0.2)
        raise SmokeError(f"{container.name} never became ready\n{self.logs(container.name)}")

    def state(self, name: str) -> str:
        found = self.podman("inspect", "--format", "{{.State.Status}}", name, check_status=False)
        return found.stdout.strip()

    def logs(self, name: str) -> str:
        done = self.podman("logs", name, check_status=False)
        return f"--- podman logs {name} ---\n{done.stdout}{done.stderr}"

    def remove(self, name: str) -> None:
        # --volumes: the anonymous volume each container gets for /data goes with it.
        self.podman("rm", "--force", "--volumes", "--time", "0", name, check_status=False)
        if name in self.containers:
            self.containers.remove(name)

    def netns(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)

    def leftovers(self) -> set[str]:
        """Containers, volumes, networks and namespaces there are now."""
        found = set()
        for kind, argv in (
            ("container", ("ps", "--all", "--format", "{{.Names}}")),
            ("volume", ("volume", "ls", "--quiet")),
            ("network", ("network", "ls", "--format", "{{.Name}}")),
        ):
            found |= {f"{kind} {name}" for name in self.podman(*argv).stdout.split()}
        # Network namespaces: only the ones made here (other tests may be making theirs).
        listed = [
            line.split()[0]
            for line in self.netns("ip", "netns", "list").stdout.splitlines()
            if line.strip()
        ]
        ours = [name for name in listed if name.startswith("forewarn-ci-") or name == "azvm"]
        return found | {f"netns {name}" for name in ours}

    def cleanup(self) -> None:
        for name in list(self.containers):
            self.remove(name)
        for volume in self.volumes:
            self.podman("volume", "rm", "--force", volume, check_status=False)
        for namespace in self.namespaces:
            self.netns("ip", "netns", "del", namespace)

    # -- the steps ------------------------------------------------------------------------

    def image_shape(self) -> str:
        """The image as the Containerfile promises it: non-root, the entry point, ports, the
        /data volume, a HEALTHCHECK (kept by --format docker), no pip nor compiler, and a
        refusal in one line without FOREWARN_TOKEN."""
        (config,) = json.loads(self.podman("image", "inspect", self.image).stdout)
        conf = config["Config"]
        check(conf["User"] == "10001:10001", f"user {conf['User']!r}")
        check(conf["Entrypoint"] == ["forewarn", "serve"], f"entry point {conf['Entrypoint']}")
        check(set(conf["ExposedPorts"]) == {"16954/tcp", "16955/tcp"}, conf["ExposedPorts"])
        check(set(conf["Volumes"]) == {"/data"}, f"volumes {conf['Volumes']}")
        health = config.get("Healthcheck") or {}
        check(health.get("Test") == ["CMD", "forewarn", "health"], f"HEALTHCHECK {health}")
        size = int(config["Size"])
        check(size <= MAX_IMAGE_BYTES, f"the image is {size / 1e6:.0f} MB (budget 200 MB)")
        tools = self.podman(
            "run", "--rm", "--network", "none", "--entrypoint", "sh", self.image, "-c",
            "for t in pip pip3 gcc cc make; do command -v $t && exit 1; done; "
            "! python -c 'import pip' 2>/dev/null",
            check_status=False,
        )  # fmt: skip
        check(tools.returncode == 0, f"build tools in the final stage: {tools.stdout}")
        refused = self.podman("run", "--rm", "--network", "none", self.image, check_status=False)
        output = refused.stdout + refused.stderr
        check(refused.returncode != 0, "started without FOREWARN_TOKEN")
        check("without a token" in output and "Traceback" not in output, output)
        return f"{size / 1e6:.0f} MB, user 10001, HEALTHCHECK kept, no pip or compiler"

    def vm_get(self) -> str:
        """A VM's GET through the published VM-facing port."""
        response = self.run_container("main").document_response()
        check(response.status_code == 200, f"{response.status_code} {response.text}")
        check(response.json() == {"DocumentIncarnation": 1, "Events": []}, response.text)
        check(response.headers["server"].startswith("IMDS/"), response.headers)
        return response.text

    def control_token(self) -> str:
        """The control API, published beyond the container: 401 without the token, an
        operation with it, shown in the VM's next document."""
        main = self._main()
        check(main.control("GET", "/api/v1/vms", token="").status_code == 401, "no token")
        check(main.control("GET", "/api/v1/vms", token="wrong").status_code == 401, "bad token")
        restarted = main.control("POST", "/api/v1/vms/vm0/restart")
        check(restarted.status_code == 200, f"{restarted.status_code} {restarted.text}")
        (event,) = restarted.json()["events"]
        document = main.document()
        check(document["DocumentIncarnation"] == 2, document)
        check([e["EventId"] for e in document["Events"]] == [event["EventId"]], document)
        return f"401 without it; restart {event['EventId']} with it"

    def healthcheck(self) -> str:
        """The image's HEALTHCHECK (forewarn health), healthy, then unhealthy with the
        journal moved out of /data, then healthy again."""
        name = self._main().name

        def status() -> int:
            return self.podman("healthcheck", "run", name, check_status=False).returncode

        check(status() == 0, f"unhealthy at start\n{self.logs(name)}")
        self.podman("exec", name, "mv", "/data/forewarn.sqlite3", "/data/moved.sqlite3")
        self._eventually("unhealthy with the journal gone", lambda: status() == 1)
        self.podman("exec", name, "mv", "/data/moved.sqlite3", "/data/forewarn.sqlite3")
        self._eventually("healthy again", lambda: status() == 0)
        return "healthy, unhealthy without its journal, healthy again"

    def sigterm(self) -> str:
        """``podman stop`` sends SIGTERM: a clean exit (0) well before podman's SIGKILL."""
        name = self._main().name
        began = time.monotonic()
        self.podman("stop", "--time", "20", name)
        seconds = time.monotonic() - began
        code = self.podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        logs = self.logs(name)
        check(code == "0", f"exit status {code} after SIGTERM\n{logs}")
        check(seconds < 15, f"took {seconds:.1f} s to stop\n{logs}")
        check("Traceback" not in logs, logs)
        self.remove(name)
        return f"exit 0 in {seconds:.1f} s"

    def scenario(self) -> str:
        """A scenario file run by the host's CLI against the container's control API."""
        scenarios = ROOT / "examples" / "scenarios"
        container = self.run_container(
            "scenario",
            options=("--volume", f"{scenarios}:/scenarios:ro"),
            args=(
                "--fleet", "/scenarios/fleet-live-migration.yaml",
                "--clock", "manual", "--profile", "fast",
            ),
        )  # fmt: skip
        done = subprocess.run(
            [
                sys.executable, "-m", "forewarn", "scenario", "run",
                str(scenarios / "live-migration.yaml"),
                "--control", f"127.0.0.1:{container.control_port}",
            ],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "FOREWARN_TOKEN": self.token},
        )  # fmt: skip
        check(done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{self.logs(container.name)}")
        self.remove(container.name)
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "passed"

    def azure_address(self) -> str:
        """The same image serving 169.254.169.254:80 inside a network namespace, for a client
        there; port 80 as a non-root user needs NET_BIND_SERVICE, and is refused in one line
        without it."""
        namespace = f"forewarn-ci-{self.suffix}"
        for argv in (
            ["ip", "netns", "add", namespace],
            ["ip", "-n", namespace, "link", "set", "lo", "up"],
            ["ip", "-n", namespace, "addr", "add", "169.254.169.254/32", "dev", "lo"],
        ):
            done = self.netns(*argv)
            check(done.returncode == 0, f"{' '.join(argv)}: {done.stderr}")
            if argv[2] == "add":
                self.namespaces.append(namespace)
        network = ("--network", f"ns:/run/netns/{namespace}")
        azure = ("--env", "FOREWARN_SERVE_BIND=169.254.169.254:80")
        denied = self.run_container("nocap", publish=False, options=(*network, *azure))
        self._eventually("a refusal without NET_BIND_SERVICE", lambda: self._exited(denied.name))
        logs = self.logs(denied.name)
        check("cannot listen on 169.254.169.254:80" in logs and "Traceback" not in logs, logs)
        self.remove(denied.name)

        served = self.run_container(
            "azure", publish=False, options=(*network, *azure, "--cap-add", "NET_BIND_SERVICE")
        )
        in_namespace = ["ip", "netns", "exec", namespace, "curl", "--silent", "--max-time", "5"]

        def curl(*argv: str) -> subprocess.CompletedProcess[str]:
            return self.netns(*in_namespace, *argv)

        self._eventually(
            "the server in the namespace",
            lambda: curl("--fail", "http://127.0.0.1:16955/healthz").returncode == 0,
            logs_of=served.name,
        )
        url = f"http://169.254.169.254{DOCUMENT}"
        first = curl("--fail", "-H", "Metadata: true", url)
        check(first.returncode == 0, first.stderr)
        check(json.loads(first.stdout) == {"DocumentIncarnation": 1, "Events": []}, first.stdout)
        bearer = f"Authorization: Bearer {self.token}"
        restart = "http://127.0.0.1:16955/api/v1/vms/vm0/restart"
        check(curl("--fail", "-X", "POST", "-H", bearer, restart).returncode == 0, "restart")
        after = json.loads(curl("--fail", "-H", "Metadata: true", url).stdout)
        check([e["EventType"] for e in after["Events"]] == ["Reboot"], after)
        self.remove(served.name)
        return "169.254.169.254:80 answered a client in the namespace; refused without the cap"

    def volume_state(self) -> str:
        """State in a named volume survives ``podman kill`` (SIGKILL) and a new container."""
        volume = f"forewarn-ci-{self.suffix}"
        self.podman("volume", "create", volume)
        self.volumes.append(volume)
        mount = ("--volume", f"{volume}:/data")
        first = self.run_container("state1", options=mount)
        restarted = first.control("POST", "/api/v1/vms/vm0/restart")
        check(restarted.status_code == 200, restarted.text)
        (event,) = restarted.json()["events"]
        before = first.document()
        self.podman("kill", first.name)
        self.remove(first.name)
        second = self.run_container("state2", options=mount)
        after = second.document()
        check(after == before, f"before the kill {before}, after {after}")
        check(after["Events"][0]["EventId"] == event["EventId"], after)
        self.remove(second.name)
        return f"event {event['EventId']}, incarnation {after['DocumentIncarnation']} kept"

    def oci_archive(self) -> str:
        """``podman save`` to an OCI archive that skopeo reads back with the same config."""
        archive = self.work / "forewarn-oci.tar"
        self.podman("save", "--format", "oci-archive", "--output", str(archive), self.image)
        inspected = subprocess.run(
            ["skopeo", "inspect", "--config", f"oci-archive:{archive}"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        check(inspected.returncode == 0, inspected.stderr)
        config = json.loads(inspected.stdout)["config"]
        check(config["Entrypoint"] == ["forewarn", "serve"], config)
        check(config["User"] == "10001:10001", config)
        return f"{archive.stat().st_size / 1e6:.0f} MB archive"

    def compose(self) -> str:
        """deploy/compose.yaml with podman-compose: forewarn and, beside it, a handler (the
        agent) that approves the restart the host's CLI asks for."""
        project = f"forewarn-ci-{self.suffix}"
        compose = ["podman-compose", "--project-name", project, "--file", "deploy/compose.yaml"]
        env = {**os.environ, "FOREWARN_TOKEN": self.token}

        def run(*argv: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*compose, *argv], cwd=ROOT, env=env,
                capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip

        try:
            up = run("up", "--detach")
            check(up.returncode == 0, f"{up.stdout}\n{up.stderr}")
            forewarn = Container(self._service(project, "forewarn"), 16954, 16955, self.token)
            self.wait_ready(forewarn)
            restarted = forewarn.control("POST", "/api/v1/vms/vm0/restart")
            check(restarted.status_code == 200, restarted.text)
            (event,) = restarted.json()["events"]

            def approved() -> bool:
                shown = forewarn.control("GET", f"/api/v1/events/{event['EventId']}")
                return shown.status_code == 404 or shown.json()["EventStatus"] == "Started"

            handler = self._service(project, "handler")
            self._eventually("the handler's approval", approved, logs_of=handler)
        finally:  # each container with its anonymous /data volume, then the rest
            for service in ("handler", "forewarn"):
                for name in self.podman(
                    "ps", "--all", "--quiet", "--filter",
                    f"label=com.docker.compose.project={project}", "--filter",
                    f"label=com.docker.compose.service={service}",
                ).stdout.split():  # fmt: skip
                    self.remove(name)
            run("down", "--volumes")
            self.podman("network", "rm", f"{project}_default", check_status=False)
        return f"the handler approved {event['EventId']}"

    def readme_blocks(self) -> str:
        """The documented container blocks as written, ``docker`` being podman here (the same
        command line) and ``sudo`` nothing, since CI runs as root."""
        blocks = readme_container_blocks()
        check(blocks, "no README or docs/container.md block is marked for .ci/container")
        for line, block in blocks:
            names = re.findall(r"--name[ =](\S+)", block)
            volumes = re.findall(r"(?:-v|--volume)[ =]([\w.-]+):/", block)
            namespaces = re.findall(r"ip netns add (\S+)", block)
            prelude = 'set -euo pipefail\ndocker() { podman "$@"; }\n'
            if os.geteuid() == 0:
                prelude += 'sudo() { "$@"; }\n'
            try:
                done = subprocess.run(
                    ["bash", "-c", prelude + block],
                    cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
                    env={
                        **os.environ,
                        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                        "FOREWARN_TOKEN": self.token,  # as the first block exported it
                    },
                )  # fmt: skip
                shown = "".join(self.logs(name) for name in names)
                check(
                    done.returncode == 0,
                    f"{line}\n{block}\n{done.stdout}\n{done.stderr}\n{shown}",
                )
            finally:
                for name in names:
                    self.remove(name)
                for volume in volumes:
                    self.podman("volume", "rm", "--force", volume, check_status=False)
                for namespace in namespaces:
                    self.netns("ip", "netns", "del", namespace)
        return f"{len(blocks)} blocks"

    def verify_in_image(self) -> str:
        """docs/verify.md's container block as written ("In the container image"): forewarn
        verify in the image grades a handler mounted into it (examples/handlers/
        good_stdlib.py as my_handler.py), exits 0 and leaves its JUnit report outside."""
        text = (ROOT / "docs" / "verify.md").read_text(encoding="utf-8")
        found = VERIFY_BLOCK.search(text)
        check(found, "docs/verify.md has no block marked for .ci/container")
        assert found is not None
        here = self.work / "verify"
        here.mkdir()
        shutil.copy(ROOT / "examples" / "handlers" / "good_stdlib.py", here / "my_handler.py")
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + found.group(1)],
            cwd=here, capture_output=True, text=True, timeout=420, check=False,
        )  # fmt: skip
        check(done.returncode == 0, f"{found.group(1)}\n{done.stdout}\n{done.stderr}")
        report = (here / "reports" / "report.xml").read_text(encoding="utf-8")
        cases = re.findall(r"<testcase ", report)
        check(len(cases) >= 8 and "<failure" not in report, report)
        return f"{len(cases)} trials graded in the image, none failed"

    # -- helpers --------------------------------------------------------------------------

    def _main(self) -> Container:
        name = self.name("main")
        check(name in self.containers, "the main container is not running")
        port = self.podman("port", name, "16954/tcp").stdout.strip().rpartition(":")[2]
        control = self.podman("port", name, "16955/tcp").stdout.strip().rpartition(":")[2]
        return Container(name, int(port), int(control), self.token)

    def _service(self, project: str, service: str) -> str:
        """The container of a compose service (podman-compose versions name them apart)."""
        found = self.podman(
            "ps", "--all", "--format", "{{.Names}}",
            "--filter", f"label=com.docker.compose.project={project}",
            "--filter", f"label=com.docker.compose.service={service}",
        ).stdout.split()  # fmt: skip
        check(len(found) == 1, f"containers of {service}: {found}")
        return found[0]

    def _exited(self, name: str) -> bool:
        return self.state(name) in ("exited", "stopped")

    def _eventually(
        self, what: str, condition: Callable[[], bool], logs_of: str | None = None
    ) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.3)
        shown = self.logs(logs_of) if logs_of else ""
        raise SmokeError(f"timed out waiting for {what}\n{shown}")

    def steps(self) -> Iterator[tuple[str, Callable[[], str]]]:
        yield "image shape", self.image_shape
        yield "VM-facing GET", self.vm_get
        yield "control API token", self.control_token
        yield "health check", self.healthcheck
        yield "SIGTERM", self.sigterm
        yield "scenario from the host", self.scenario
        yield "169.254.169.254 in a network namespace", self.azure_address
        yield "state in a volume across podman kill", self.volume_state
        yield "OCI archive", self.oci_archive
        yield "compose file", self.compose
        yield "README blocks", self.readme_blocks
        yield "forewarn verify in the image", self.verify_in_image


#: The pages whose container blocks .ci/container runs as written.
CONTAINER_PAGES = (ROOT / "README.md", ROOT / "docs" / "container.md")


def readme_container_blocks(
    pages: tuple[Path, ...] = CONTAINER_PAGES,
) -> list[tuple[str, str]]:
    """The shell blocks of the README and docs/container.md marked as run by .ci/container,
    each with where it is (``page:line``)."""
    found = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            before = text[: match.start()].rstrip().splitlines()
            if before and README_MARKER.search(before[-1]):
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--image", required=True)
    parser.add_argument("--work", type=Path, required=True)
    options = parser.parse_args()
    for tool in ("podman", "podman-compose", "skopeo", "ip", "curl"):
        if shutil.which(tool) is None:
            print(f"container smoke: {tool} is not installed", file=sys.stderr)
            return 1
    smoke = Smoke(options.image, options.work)
    began = time.monotonic()
    before = smoke.leftovers()
    passed = failed = 0
    try:
        for title, step in smoke.steps():
            step_began = time.monotonic()
            try:
                said = step()
            except (SmokeError, subprocess.TimeoutExpired, httpx.HTTPError) as exc:
                print(f"container smoke: FAILED {title}: {exc}", file=sys.stderr)
                failed += 1
                break
            passed += 1
            seconds = time.monotonic() - step_began
            print(f"container smoke: ok {title} ({seconds:.1f} s): {said}")
    finally:
        smoke.cleanup()
    left = smoke.leftovers() - before
    if left:
        print(f"container smoke: FAILED leaving nothing behind: {sorted(left)}", file=sys.stderr)
        failed += 1
    print(f"container smoke: {time.monotonic() - began:.0f} s")
    print(f"smoke: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
