"""What routing a single-table design costs the job: the same app records through the job
twice, once with the packaged `app` contract (three entities and the unrouted table: four
raw tables) and once with a flat contract of the same table (one raw table typing the
union of the entities' attributes).

Both variants parse the same records and type the same attributes, so what differs is
what routing adds: reading each record's keys for the routes, one typed projection and
one change-log write per raw table instead of one, and the unrouted items' change
records. The routing share is (routed - flat) / routed of the job's seconds, and the
same of the CPU seconds the job's processes (driver and JVM) spent: on a shared machine
wall time also counts the other processes' load, CPU time much less. The runs alternate
between the variants, and each variant's fastest run counts, so a burst of load does not
land on one variant only.
"""
from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from benchmarks.datasets import LandingSet
from benchmarks.measure import stream_run
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR

APP_CONTRACT = SAMPLE_CONTRACTS_DIR / "app.yml"


def flat_contract(routed: dict[str, Any]) -> dict[str, Any]:
    """The contract document `routed` without entities: one raw table named after the
    DynamoDB table, with the shared attributes and every entity's attributes."""
    entities = routed.get("entities")
    if not entities:
        raise ValueError(f"contract of table {routed.get('table')!r} declares no entities: nothing is routed")
    attributes = dict(routed["attributes"])
    for name, entity in entities.items():
        for attribute, spec in entity.get("attributes", {}).items():
            if attribute in attributes and attributes[attribute] != spec:
                raise ValueError(f"entity {name!r} declares {attribute!r} unlike another entity: no flat union")
            attributes[attribute] = spec
    flat = {key: value for key, value in routed.items() if key not in ("entities", "unrouted_table")}
    return {**flat, "raw_table": routed["table"], "attributes": attributes}


def write_contract_dirs(work: Path, routed_contract: Path = APP_CONTRACT, others: Iterable[Path] = ()) -> dict[str, Path]:
    """Contract folders holding the routed contract, and its flat twin, each beside copies
    of the `others`."""
    document = yaml.safe_load(routed_contract.read_text(encoding="utf-8"))
    folders = {"routed": work / "contracts-routed", "flat": work / "contracts-flat"}
    for folder in folders.values():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for other in others:
            shutil.copyfile(other, folder / other.name)
    shutil.copyfile(routed_contract, folders["routed"] / routed_contract.name)
    (folders["flat"] / routed_contract.name).write_text(yaml.safe_dump(flat_contract(document), sort_keys=False),
                                                        encoding="utf-8")
    return folders


def routing_figures(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The fastest run of each variant and the share of the routed job's time routing takes.
    Both variants must have read, landed and quarantined the same number of records."""
    for field in ("records_in", "landed", "quarantined", "duplicates_dropped"):
        seen = {run[field] for variant in runs.values() for run in variant}
        if len(seen) != 1:
            raise RuntimeError(f"the variants differ in {field}: {seen}; they did not process the same records")
    routed = min(run["seconds"] for run in runs["routed"])
    flat = min(run["seconds"] for run in runs["flat"])
    routed_cpu = min(run["cpu_seconds"] for run in runs["routed"])
    flat_cpu = min(run["cpu_seconds"] for run in runs["flat"])
    return {
        "routed_seconds": routed,
        "flat_seconds": flat,
        "routing_share": (routed - flat) / routed,
        "routed_over_flat": routed / flat,
        "routed_cpu_seconds": routed_cpu,
        "flat_cpu_seconds": flat_cpu,
        "routing_cpu_share": (routed_cpu - flat_cpu) / routed_cpu,
        "runs": runs,
    }


def measure_routing(landing: LandingSet, work: Path, master: str, rounds: int) -> dict[str, Any]:
    """`rounds` runs of each variant over `landing`, alternating, each in a fresh process."""
    folders = write_contract_dirs(work)
    runs: dict[str, list[dict[str, Any]]] = {"routed": [], "flat": []}
    for round_number in range(rounds):
        for variant, contracts_dir in folders.items():
            data_dir = work / f"routing-{variant}"
            run = stream_run(landing, data_dir, master, label=f"routing-{variant}-{round_number}",
                             contracts_dir=contracts_dir)
            runs[variant].append({key: run.result[key] for key in (
                "seconds", "cpu_seconds", "records_in", "landed", "quarantined", "duplicates_dropped",
                "landed_by_table")}
                | {"batches": len(run.result["batch_seconds"])})
            shutil.rmtree(data_dir, ignore_errors=True)
    return {"events": landing.records, "files": len(landing.files), "master": master, **routing_figures(runs)}
