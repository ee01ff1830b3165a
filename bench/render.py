"""The benchmark figures of ``docs/benchmarks.md``, ``bench/RESULTS.md`` and the sizing of
``docs/scale-out.md``, from one results file.

Each figure the two documents quote from a run lies between ``<!-- bench:begin NAME -->`` and
``<!-- bench:end -->``; ``python -m bench.render`` writes every such block again from
``bench/results.json``, and ``--check`` only says which differ (the test suite runs it, so a
figure edited by hand, or a results file committed without its documents, fails). Each
target's verdict is the one its figures give: met when the measured figure is on the
target's side of its limit, missed otherwise, with no tolerance.

Every ratio of two servers is the **median of the rounds' ratios**: each round measures both
servers side by side, its ratio is taken, and the median of those is quoted (not the ratio of
the two medians, which compares figures from different rounds).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.cheap_paths import cheap_path_lines
from bench.report import (
    SCENARIOS,
    Target,
    cluster_phase_costs,
    figure,
    scenario_key,
    startup_summary,
    targets,
)
from bench.sizing import sizing_block

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
#: The documents whose blocks are rendered.
DOCUMENTS = (
    ROOT / "docs" / "benchmarks.md",
    ROOT / "bench" / "RESULTS.md",
    ROOT / "docs" / "scale-out.md",
)
BLOCK = re.compile(
    r"(?P<begin><!-- bench:begin (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)"
    r"(?P<end><!-- bench:end -->)",
    re.S,
)
RATIO_STATISTIC = (
    "A ratio of two servers is the median of the rounds' ratios (each round measures both "
    "side by side), not the ratio of the medians."
)


class RenderError(ValueError):
    """A document names a block this module does not make."""


def verdict(target: Target) -> str:
    return "met" if target.met else "missed"


def _targets(results: dict[str, Any]) -> list[Target]:
    """The targets worked out again from the figures (never the verdicts stored beside)."""
    return targets(results)


def targets_block(results: dict[str, Any]) -> str:
    rows = [
        "| target | measured | limit | verdict |",
        "|---|---:|---:|---|",
    ]
    for target in _targets(results):
        sign = ">=" if target.higher_is_better else "<="
        measured = f"**{figure(target.measured, target.unit, target.limit)}**"
        if not target.condition:
            measured += " (not served)"
        rows.append(
            f"| {target.name} | {measured} | {sign} {figure(target.limit, target.unit)} "
            f"| {verdict(target)} |"
        )
    missing = [
        scenario
        for scenario in SCENARIOS
        if scenario_key(scenario) not in results and scenario not in results.get("skipped", {})
    ]
    notes = [RATIO_STATISTIC]
    for scenario, reason in results.get("skipped", {}).items():
        notes.append(f"`{scenario}` was skipped: {reason}.")
    if missing:
        notes.append(
            "Not measured in this file: "
            + ", ".join(f"`{scenario}`" for scenario in missing)
            + " (`python -m bench --merge --only "
            + ",".join(missing)
            + "` adds them)."
        )
    return "\n".join(rows) + "\n\n" + "\n".join(notes) + "\n"


def _machine(machine: dict[str, Any]) -> str:
    memory = machine.get("memory_bytes")
    parts = [
        f"{machine['cores']} x {machine['cpu']}",
        f"{memory / 2**30:.0f} GiB" if memory else "memory not recorded",
        f"kernel {machine['kernel']}",
        f"Python {machine['python']}",
    ]
    parts += [
        f"{name} {machine[name]}"
        for name in ("uvloop", "httptools", "orjson", "py-spy")
        if name in machine
    ]
    parts += [machine[name] for name in ("nginx", "wrk") if name in machine]
    return ", ".join(parts)


def _load(figures: list[float] | None) -> str:
    return "not recorded" if figures is None else f"{figures[0]:.2f}"


def run_block(results: dict[str, Any]) -> str:
    """Each run whose figures the file holds: when, at which commit, how, on what."""
    runs = results["runs"]
    one_machine = all(run["machine"] == runs[0]["machine"] for run in runs)
    head = "| measured | commit | command | scenarios | load average (1 min) before, after |"
    rows = [
        head + ("" if one_machine else " machine |"),
        "|---|---|---|---|---|" + ("" if one_machine else "---|"),
    ]
    for run in runs:
        commit = run["commit"] if run["commit"] == "unknown" else f"`{run['commit'][:12]}`"
        if run.get("dirty"):
            commit += " with uncommitted changes"
        rows.append(
            f"| {run['date'].replace('T', ' ').replace('+00:00', ' UTC')} | {commit} | "
            f"`{run['command']}` | {', '.join(run['scenarios'])} | "
            f"{_load(run.get('load_average_before'))}, {_load(run.get('load_average_after'))} |"
            + ("" if one_machine else f" {_machine(run['machine'])} |")
        )
    if one_machine:
        rows += ["", f"Machine: {_machine(runs[0]['machine'])}."]
    notes = sorted({run["note"] for run in runs if run.get("note")})
    return "\n".join(rows) + "\n" + "".join(f"\n{note}.\n" for note in notes)


def _spread(figure: dict[str, float], spec: str) -> str:
    return f"{figure['median']:{spec}} [{figure['min']:{spec}}-{figure['max']:{spec}}]"


def _rounds(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def throughput_block(results: dict[str, Any]) -> str:
    throughput = results["throughput"]
    rows = [
        f"{throughput['document_bytes']}-byte document, wrk with {throughput['connections']} "
        f"connections, {throughput['rounds']} round(s) of {throughput['duration_s']:g} s per "
        "server and mode; median [the rounds' ratios]:",
        "",
        "| mode | forewarn req/s | nginx req/s | forewarn / nginx | CPU us/req forewarn | nginx "
        "| CPU, nginx / forewarn |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in throughput["modes"]:
        rows.append(
            f"| {mode['mode']} | {mode['forewarn_rps']:,.0f} | {mode['nginx_rps']:,.0f} | "
            f"**{mode['ratio']:.2f}x** [{_rounds(mode['ratios'])}] | "
            f"{mode['forewarn_cpu_us']:.1f} | {mode['nginx_cpu_us']:.1f} | "
            f"{mode['cpu_ratio']:.2f}x |"
        )
    return "\n".join(rows) + "\n"


def real_workload_block(results: dict[str, Any]) -> str:
    real = results["real_workload"]
    rows = [
        f"VMs polling once every {real.get('period_s', 1.0):g} s at their own addresses, "
        f"{real['rounds']} round(s) of {real['seconds']:g} s per server and mode; median "
        "[min-max] over rounds:",
        "",
        "| server | mode | VMs | polls/s | server CPU us/poll | generator CPU us/poll "
        "| p50 ms | p99 ms | max ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in real["summary"]:
        rows.append(
            f"| {row['server']} | {row['mode']} | {row['vms']:,} | "
            f"{row['polls_per_s']['median']:,.0f} | "
            f"{_spread(row['server_cpu_us_per_poll'], '.1f')} | "
            f"{row['generator_cpu_us_per_poll']['median']:.1f} | "
            f"{row['p50_ms']['median']:.2f} | {_spread(row['p99_ms'], '.2f')} | "
            f"{row['max_ms']['median']:.1f} |"
        )
    rows.append("")
    for mode in real["modes"]:
        ratio = (
            "no round without errors"
            if mode["cpu_ratio"] is None
            else f"**{mode['cpu_ratio']:.2f}x** [{_rounds(mode['cpu_ratios'])}]"
        )
        floor = mode.get("floor_cpu_ratio")
        rows.append(
            f"- {mode['mode']}: server CPU per poll, nginx / forewarn {ratio} "
            f"({mode['rounds_without_errors']} of {mode['rounds']} rounds without errors); "
            "nginx / the Python floor " + ("-" if floor is None else f"{floor:.2f}x")
        )
    late = [row for row in real["rows"] if row["generator_lag_p99_ms"] > 1.0]
    rows.append(
        f"- polls failed (unanswered within a second, wrong status or length): "
        f"{real['errors']:,} over {len(real['rows'])} runs; the generator sent late (p99 "
        f"above 1 ms) in {len(late)} of them"
    )
    return "\n".join(rows) + "\n"


def profile_block(results: dict[str, Any]) -> str:
    real = results["real_workload"]
    profiles = real.get("profiles") or {}
    if "skipped" in profiles:
        return f"The profile was skipped: {profiles['skipped']}.\n"
    cpu = {
        (row["server"], row["mode"]): row["server_cpu_us_per_poll"]["median"]
        for row in real["summary"]
    }
    columns = [
        (server, mode)
        for mode in ("keep-alive", "new-connection")
        for server in profiles
        if "layers" in profiles[server].get(mode, {})
    ]
    if not columns:
        return "No profile in the results file.\n"
    rows = [
        "| layer, us per poll | " + " | ".join(f"{s} {m}" for s, m in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    layers = dict.fromkeys(
        layer for server, mode in columns for layer in profiles[server][mode]["layers"]
    )
    for layer in layers:
        cells = [profiles[server][mode]["layers"].get(layer) for server, mode in columns]
        rows.append(
            f"| {layer} | "
            + " | ".join(
                "" if share is None else f"{share * cpu[column]:.1f}"
                for share, column in zip(cells, columns, strict=True)
            )
            + " |"
        )
    rows.append(
        "| samples (busy) | "
        + " | ".join(f"{profiles[s][m]['samples']:,}" for s, m in columns)
        + " |"
    )
    return "\n".join(rows) + "\n"


def scale_block(results: dict[str, Any]) -> str:
    scale = results["scale"]
    rounds_us = scale.get("campaign_rounds_us", {})
    rows = [
        "| VMs | campaign s | CPU s | us per VM, median [rounds] | collector us/VM | setup s "
        "| B per idle VM |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for campaign, memory in zip(scale["campaigns"], scale["memory"], strict=True):
        rounds = rounds_us.get(str(campaign["vms"]), [campaign["per_vm_microseconds"]])
        rows.append(
            f"| {campaign['vms']:,} | {campaign['campaign_seconds']:.2f} | "
            f"{campaign['campaign_cpu_seconds']:.2f} | {campaign['per_vm_microseconds']:.0f} "
            f"[{min(rounds):.0f}-{max(rounds):.0f}, {len(rounds)}] | "
            f"{campaign.get('collector_seconds', 0.0) / campaign['vms'] * 1e6:.1f} | "
            f"{campaign['setup_seconds']:.2f} | {memory['bytes_per_idle_vm']:,.0f} |"
        )
    grouped_rounds = scale.get("grouped_schedule_rounds_us", {})
    grouped = ", ".join(
        f"{float(us):.1f} us [{min(grouped_rounds.get(vms, [us])):.1f}-"
        f"{max(grouped_rounds.get(vms, [us])):.1f}] at {int(vms):,} VMs"
        for vms, us in scale["grouped_schedule_us"].items()
    )
    campaigns = scale["campaigns"]
    growth = scale.get("time_per_vm_growth_without_collector")
    rows += [
        "",
        f"- one event scheduled for VMs in availability sets of 10 (median [rounds]): {grouped}",
        f"- cost per VM, {campaigns[-1]['vms']:,} VMs / {campaigns[0]['vms']:,}: campaign "
        f"**{scale['time_per_vm_growth']:.2f}x**"
        + ("" if growth is None else f" ({growth:.2f}x without the collector's time)")
        + f", one event in availability sets of 10 **{scale['grouped_schedule_growth']:.2f}x**",
    ]
    timed = [c for c in campaigns if c.get("phase_seconds")]
    if timed:
        rows += [
            "",
            "Each step of the campaign, us per VM (of which the collector's):",
            "",
            "| step | " + " | ".join(f"{c['vms']:,} VMs" for c in timed) + " |",
            "|---|" + "---:|" * len(timed),
        ]
        for phase in timed[0]["phase_seconds"]:
            rows.append(
                f"| {phase} | "
                + " | ".join(
                    f"{c['phase_seconds'][phase] / c['vms'] * 1e6:.1f} "
                    f"({c['phase_collector_seconds'][phase] / c['vms'] * 1e6:.1f})"
                    for c in timed
                )
                + " |"
            )
    return "\n".join(rows) + "\n"


def memory_block(results: dict[str, Any]) -> str:
    memory = results["memory"]
    rows = ["| fleet | RSS | peak | start-up |", "|---:|---:|---:|---:|"]
    for served in (memory["one"], memory["fleet"]):
        rows.append(
            f"| {served['vms']:,} VM(s) | {served['rss_bytes'] / 2**20:.1f} MiB | "
            f"{served['hwm_bytes'] / 2**20:.1f} MiB | {served['start_seconds']:.1f} s |"
        )
    rows.append("")
    rows.append(f"**{memory['bytes_per_vm']:,.0f} B per polled VM**: (RSS_N - RSS_1) / (N - 1).")
    return "\n".join(rows) + "\n"


def _bullets(lines: list[str]) -> str:
    return "".join(f"- {line}\n" for line in lines)


def cheap_paths_block(results: dict[str, Any]) -> str:
    return _bullets(cheap_path_lines(results["cheap_paths"]))


def propagation_block(results: dict[str, Any]) -> str:
    p = results["propagation"]
    return _bullets(
        [
            f"{p['shown']} of {p['samples']} changes made through one of {p['front_ends']} "
            f"front-ends shown by another; {p.get('stale_first_answers', 0)} stale first "
            "answers",
            f"from sending the change to the other front-end's first answer showing it: p50 "
            f"{p['p50_ms']:.2f} ms, **p99 {p['p99_ms']:.2f} ms**, max {p['max_ms']:.2f} ms",
            f"the change's own round trip p50 {p['change_p50_ms']:.2f} ms, p99 "
            f"{p['change_p99_ms']:.2f} ms; from its answer p50 {p['after_answer_p50_ms']:.2f} "
            f"ms, p99 {p['after_answer_p99_ms']:.2f} ms",
        ]
    )


def cluster_campaign_block(results: dict[str, Any]) -> str:
    campaigns = results["cluster_campaign"]
    rows = [
        "| VMs | front-ends | approvals a turn | campaign | per VM | journal records | "
        "transactions | one process | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in campaigns:
        rows.append(
            f"| {row['vms']:,} | {row['front_ends']} | {_given(row, 'approvals_per_turn')} | "
            f"{row['campaign_seconds']:.2f} s | {row['per_vm_microseconds']:,.0f} us | "
            f"{row['journal_records']:,} | {_given(row, 'journal_transactions')} | "
            f"{row['single_process_seconds']:.2f} s | "
            f"**{row['ratio_to_single_process']:.1f}x** |"
        )
    timed = [row for row in campaigns if row.get("phase_seconds")]
    if timed:
        rows += [
            "",
            "Each step of the campaign, us per VM, shared / in one process (the schedule is one "
            "control-plane operation a VM, all asked for at once and committed together as serve "
            "commits concurrent ones, MAX_GROUP to a transaction; the approvals are grouped by "
            "turn):",
            "",
            "| step | " + " | ".join(f"{row['vms']:,} VMs" for row in timed) + " |",
            "|---|" + "---:|" * len(timed),
        ]
        costs = [cluster_phase_costs(row) for row in timed]
        for index, phase in enumerate(timed[0]["phase_seconds"]):
            rows.append(
                f"| {phase} | "
                + " | ".join(
                    f"{shared:,.0f} / {single:,.1f}"
                    for _, shared, single in (c[index] for c in costs)
                )
                + " |"
            )
    return "\n".join(rows) + "\n"


def _given(row: dict[str, Any], field: str) -> str:
    """A count the row has, or a dash for a run made before it was recorded."""
    value = row.get(field)
    return "-" if value is None else f"{value:,}"


def startup_block(results: dict[str, Any]) -> str:
    startup = results["startup"]
    text = _bullets([startup_summary(startup[key]) for key in ("served", "largest")])
    profile = startup.get("profile") or {}
    if "skipped" in profile or "error" in profile:
        return text + f"\nThe profile was not made: {profile.get('skipped') or profile['error']}.\n"
    if not profile.get("samples"):
        return text
    rows = [
        "",
        f"Where the served fleet's start-up goes (py-spy, {profile['samples']:,} samples at "
        f"{profile['rate']} a second, a run of its own): each module's inclusive share, the "
        "samples whose stack holds one of its frames, so the shares overlap:",
        "",
        "| module | share of the start-up |",
        "|---|---:|",
    ]
    rows += [f"| `{module}` | {share:.0%} |" for module, share in profile["inclusive"]]
    return text + "\n".join(rows) + "\n"


#: Each block a document may hold, and the results it needs (None: always made).
BLOCKS: dict[str, tuple[str | None, Callable[[dict[str, Any]], str]]] = {
    "run": (None, run_block),
    "targets": (None, targets_block),
    "throughput": ("throughput", throughput_block),
    "real-workload": ("real_workload", real_workload_block),
    "profile": ("real_workload", profile_block),
    "scale": ("scale", scale_block),
    "memory": ("memory", memory_block),
    "cheap-paths": ("cheap_paths", cheap_paths_block),
    "propagation": ("propagation", propagation_block),
    "cluster-campaign": ("cluster_campaign", cluster_campaign_block),
    "startup": ("startup", startup_block),
    # worked out from the real workload, memory, propagation and shared campaign figures
    "sizing": ("cluster_campaign", sizing_block),
}


def block(name: str, results: dict[str, Any]) -> str:
    """The body of block ``name``, from ``results``."""
    if name not in BLOCKS:
        raise RenderError(f"no block named {name!r} (known: {', '.join(BLOCKS)})")
    needs, make = BLOCKS[name]
    if needs is not None and needs not in results:
        scenario = needs.replace("_", "-")
        skipped = results.get("skipped", {}).get(scenario)
        why = f"skipped: {skipped}" if skipped else "not measured"
        return (
            f"Not in `bench/results.json` ({why}); `python -m bench --merge --only {scenario}` "
            "measures it.\n"
        )
    return make(results)


def render(text: str, results: dict[str, Any]) -> str:
    """``text`` with every generated block made again from ``results``."""
    return BLOCK.sub(
        lambda found: found["begin"] + block(found["name"], results) + found["end"], text
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.render", description=__doc__)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--check", action="store_true", help="change nothing; fail if a document differs"
    )
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text(encoding="utf-8"))
    stale = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        made = render(text, results)
        if made != text:
            stale.append(document)
            if not args.check:
                document.write_text(made, encoding="utf-8")
    for document in stale:
        verb = "differs from" if args.check else "made again from"
        print(f"{document.relative_to(ROOT)} {verb} {args.results}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
