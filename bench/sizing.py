"""Sizing a fleet of 10,000 to 1,000,000 VMs, on paper, from the figures of one results file.

Nothing here is measured: every number is worked out from ``bench/results.json`` (the real
workload's CPU per poll, one listener's answered polls when it saturates, the server's memory
per polled VM, a shared write's round trip, the shared campaign's transactions), so the table
in docs/scale-out.md (the ``sizing`` block, written by ``python -m bench.render``) changes with
the figures it comes from, and says which. The arithmetic, for a fleet of ``N`` VMs each
polling once a second:

- **cores, kept alive**: ``N x`` the server's CPU per poll (keep-alive) ``/ 1 s``: every core
  a worker (``forewarn serve --workers``), each answering its share;
- **workers, a new connection per poll**: ``N /`` the polls one listener answered a second
  when saturated (its accept rate: a new connection per poll is accepted, read, answered and
  closed on one core);
- **front-end machines**: the larger of the two, over the measuring machine's cores;
- **memory per worker**: every worker holds the whole fleet, so ``N x`` the server's memory
  per polled VM, and a machine holds that once per worker;
- **PostgreSQL transactions a second**: the campaign's transactions per VM (the shared
  campaign's ``journal_transactions / vms`` at its largest size, approvals grouped as it
  groups them) times ``N``, every VM approving within its poll period; against what one
  namespace takes, one write at a time under its lock: ``1 s /`` a write's round trip
  (the propagation scenario's median change).

The bound of each size is the resource furthest past what the measuring machine has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The fleets sized.
SIZES = (10_000, 100_000, 1_000_000)
#: How often each VM polls (the real workload's period, and the documented advice).
POLL_SECONDS = 1.0


class SizingError(ValueError):
    """The results file lacks a figure the sizing is worked out from."""


@dataclass(frozen=True)
class Capacity:
    """The measured figures the sizing is worked out from."""

    keep_alive_cpu_us: float
    keep_alive_measured_vms: int
    new_connection_polls_per_s: float
    new_connection_cpu_us: float
    bytes_per_vm: float
    memory_measured_vms: int
    write_ms: float
    transactions_per_vm: float
    campaign_vms: int
    approvals_per_turn: int
    cores: int
    memory_bytes: int

    @property
    def vms_per_core(self) -> float:
        """VMs polling once a second one core answers, kept alive, at full use."""
        return POLL_SECONDS * 1e6 / self.keep_alive_cpu_us

    @property
    def vms_per_listener(self) -> float:
        """VMs polling once a second on new connections one listener answers."""
        return POLL_SECONDS * self.new_connection_polls_per_s

    @property
    def namespace_transactions_per_s(self) -> float:
        """Writes one namespace commits a second, one at a time under its lock."""
        return 1000.0 / self.write_ms


@dataclass(frozen=True)
class Sized:
    vms: int
    cores: int
    workers: int
    machines: int
    worker_bytes: float
    machine_bytes: float
    transactions_per_s: float
    bound: str


def capacity(results: dict[str, Any]) -> Capacity:
    """The figures of ``results`` the sizing needs; :class:`SizingError` naming a missing one."""
    try:
        summary = {(row["server"], row["mode"]): row for row in results["real_workload"]["summary"]}
        kept = summary[("forewarn", "keep-alive")]
        fresh = summary[("forewarn", "new-connection")]
        memory = results["memory"]
        campaign = results["cluster_campaign"][-1]
        (machine,) = {run["machine"]["cores"]: run["machine"] for run in results["runs"]}.values()
        return Capacity(
            keep_alive_cpu_us=kept["server_cpu_us_per_poll"]["median"],
            keep_alive_measured_vms=kept["vms"],
            new_connection_polls_per_s=fresh["polls_per_s"]["median"],
            new_connection_cpu_us=fresh["server_cpu_us_per_poll"]["median"],
            bytes_per_vm=memory["bytes_per_vm"],
            memory_measured_vms=memory["fleet"]["vms"],
            write_ms=results["propagation"]["change_p50_ms"],
            transactions_per_vm=campaign["journal_transactions"] / campaign["vms"],
            campaign_vms=campaign["vms"],
            approvals_per_turn=campaign["approvals_per_turn"],
            cores=machine["cores"],
            memory_bytes=machine["memory_bytes"],
        )
    except (KeyError, ValueError) as exc:
        raise SizingError(f"the results file lacks a figure the sizing needs: {exc}") from exc


def size(vms: int, measured: Capacity) -> Sized:
    """What ``vms`` VMs polling once a second need, and what bounds it."""
    cores = math.ceil(vms / measured.vms_per_core)
    workers = math.ceil(vms / measured.vms_per_listener)
    machines = math.ceil(max(cores, workers) / measured.cores)
    worker_bytes = vms * measured.bytes_per_vm
    machine_bytes = worker_bytes * min(measured.cores, max(cores, workers))
    transactions = vms * measured.transactions_per_vm / POLL_SECONDS
    # how far past the measuring machine (or one namespace) each resource is
    demands = {
        "the database's writes (one namespace)": (
            transactions / measured.namespace_transactions_per_s
        ),
        "one listener's accept rate (new connections)": workers / measured.cores,
        "CPU (kept-alive polls)": cores / measured.cores,
        "memory per VM (every worker holds the fleet)": machine_bytes / measured.memory_bytes,
    }
    return Sized(
        vms=vms,
        cores=cores,
        workers=workers,
        machines=machines,
        worker_bytes=worker_bytes,
        machine_bytes=machine_bytes,
        transactions_per_s=transactions,
        bound=max(demands, key=lambda name: demands[name]),
    )


def _bytes(value: float) -> str:
    return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"


def sizing_block(results: dict[str, Any]) -> str:
    measured = capacity(results)
    rows = [
        "| measured (bench/results.json) | figure |",
        "|---|---:|",
        f"| VMs a core (a worker) answers polling once a second, kept alive "
        f"({measured.keep_alive_cpu_us:.1f} us of CPU a poll; {measured.keep_alive_measured_vms:,}"
        f" served on one core) | {measured.vms_per_core:,.0f} |",
        f"| VMs one listener (one worker) answers polling once a second on a new connection "
        f"each (polls answered a second when saturated, {measured.new_connection_cpu_us:.1f} us "
        f"a poll) | {measured.vms_per_listener:,.0f} |",
        f"| VMs a front-end machine of {measured.cores} cores answers (a worker a core), kept "
        f"alive / on new connections | {measured.cores * measured.vms_per_core:,.0f} / "
        f"{measured.cores * measured.vms_per_listener:,.0f} |",
        f"| server memory per polled VM (at {measured.memory_measured_vms:,} VMs) "
        f"| {measured.bytes_per_vm:,.0f} B |",
        f"| PostgreSQL transactions per VM of a campaign ({measured.campaign_vms:,} VMs shared, "
        f"{measured.approvals_per_turn} approvals to a transaction) "
        f"| {measured.transactions_per_vm:.4f} |",
        f"| transactions a second one namespace commits (one write at a time, "
        f"{measured.write_ms:.2f} ms each) | {measured.namespace_transactions_per_s:,.0f} |",
        "",
        f"| VMs | cores, kept alive | workers, new connections | front-end machines of "
        f"{measured.cores} cores | memory a worker / a machine | campaign transactions a second "
        "| bound |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for vms in SIZES:
        sized = size(vms, measured)
        rows.append(
            f"| {vms:,} | {sized.cores:,} | {sized.workers:,} | {sized.machines:,} | "
            f"{_bytes(sized.worker_bytes)} / {_bytes(sized.machine_bytes)} | "
            f"{sized.transactions_per_s:,.0f} | {sized.bound} |"
        )
    return "\n".join(rows) + "\n"


__all__ = ["SIZES", "Capacity", "Sized", "SizingError", "capacity", "size", "sizing_block"]
