"""`make drills`: fault drills, each bounded in count and time and stopping by itself.

    python -m benchmarks.drills [--trials 20] [--quick] [--only kill,cluster,s3a,fuzz,property,dbt]
                                [--sink parquet|hudi|both]

- kill:     SIGKILL the streaming job at random points, restart until done; the raw
            tables and quarantine must equal a clean run's on the same sink (no loss,
            no duplicates). With Hudi also between a table's change-log and
            current-state commits and inside a commit (`.inflight` on the timeline).
            Then a lost checkpoint (refused, or no duplicate) and a second writer
            (refused by the data-dir lock), once per sink.
- cluster:  `lakehouse stream` on a Spark standalone cluster (master + 2 workers as
            separate JVMs on 127.0.0.1); one worker SIGKILLed after the first commit;
            change logs, quarantine and current state must equal a local[2] run's.
- s3a:      the job writes its raw tables, quarantine and checkpoint to s3a:// on moto's S3
            (127.0.0.1); rows read back (Spark, hudi-rs) and copied down must equal a local
            run's; with Parquet, crashes inside the rename that publishes a batch
            (benchmarks/s3a_drill.py).
--sink:     the raw sink of the kill, cluster and s3a drills (default both: one section each).
- fuzz:     >= 1000 malformed and hostile records mixed with good ones: no batch fails,
            every bad record quarantined with its reason, every good record lands.
- property: hypothesis: any interleaving, duplication and batching of key histories
            lands each batch's distinct events once in the change log and converges to
            the in-order final state (latest per key), through raw and stg_ models.
- dbt:      incremental == full refresh after random batch histories; a build killed
            midway leaves the previous tables readable.

Results: results/drills.json, results/drills.png and a table on stdout. Exit code 1
when a drill failed.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.measure import REPO_ROOT, machine_info, prepare_run

DRILLS = ("kill", "cluster", "s3a", "fuzz", "property", "dbt")
SINK_CHOICES = ("parquet", "hudi", "both")
# The packaged contract of the quick Hudi kill drill: one raw table, two Hudi commits a
# batch (the packaged three contracts make twelve, minutes a batch on a small machine);
# the other tables' records go to the quarantine as unknown tables, compared too.
QUICK_HUDI_KILL_CONTRACTS = ("customers.yml",)


@dataclass(frozen=True)
class DrillPlan:
    kill_trials: int
    kill_files: int
    kill_records_per_file: int
    fuzz_bad: int
    fuzz_good_customers: int
    fuzz_batches: int
    property_examples: int
    property_staging_examples: int
    dbt_histories: int
    dbt_batches: int
    dbt_keys: int
    cluster_customers: int
    cluster_records_per_file: int
    cluster_files_per_batch: int
    # The kill drill on the Hudi sink with the packaged contracts (else QUICK_HUDI_KILL_CONTRACTS).
    hudi_kill_all_contracts: bool = True
    seed: int = 20261101


def plan_from_args(args: argparse.Namespace) -> DrillPlan:
    if args.quick:
        plan = DrillPlan(kill_trials=2, kill_files=2, kill_records_per_file=200, fuzz_bad=1100,
                         fuzz_good_customers=40, fuzz_batches=2, property_examples=4, property_staging_examples=1,
                         dbt_histories=1, dbt_batches=3, dbt_keys=12,
                         cluster_customers=60, cluster_records_per_file=150, cluster_files_per_batch=2,
                         hudi_kill_all_contracts=False)
    else:
        plan = DrillPlan(kill_trials=20, kill_files=4, kill_records_per_file=300, fuzz_bad=1500,
                         fuzz_good_customers=150, fuzz_batches=4, property_examples=25, property_staging_examples=4,
                         dbt_histories=3, dbt_batches=4, dbt_keys=25,
                         cluster_customers=200, cluster_records_per_file=300, cluster_files_per_batch=2)
    if args.trials is not None:
        plan = DrillPlan(**{**asdict(plan), "kill_trials": args.trials})
    return plan


def progress(message: str) -> None:
    print(f"[drills {time.strftime('%H:%M:%S')}] {message}", flush=True)


def sinks_from_args(sink: str) -> tuple[str, ...]:
    return ("parquet", "hudi") if sink == "both" else (sink,)


def section_name(base: str, sink: str) -> str:
    """`kill_9` and `cluster_worker_kill` keep their names on Parquet; Hudi's get `_hudi`."""
    return base if sink == "parquet" else f"{base}_{sink}"


def quick_contracts(work: Path) -> str:
    from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR

    folder = work / "contracts"
    folder.mkdir(parents=True, exist_ok=True)
    for name in QUICK_HUDI_KILL_CONTRACTS:
        shutil.copy(Path(SAMPLE_CONTRACTS_DIR) / name, folder / name)
    return str(folder)


def run_kill(plan: DrillPlan, work: Path, sink: str = "parquet") -> dict[str, Any]:
    from benchmarks.datasets import generate_landing
    from benchmarks.kill_drill import kill_drill
    from streaming.io.layout import DataLayout

    landing = generate_landing(DataLayout(work / "kill" / sink).landing, plan.kill_files * plan.kill_records_per_file,
                               records_per_file=plan.kill_records_per_file, seed=plan.seed % 1000)
    contracts_dir = None if sink == "parquet" or plan.hudi_kill_all_contracts else quick_contracts(work / "kill")
    progress(f"kill drill ({sink}): {plan.kill_trials} trials over {len(landing.files)} files ({landing.records} "
             f"records){'; contracts ' + ', '.join(QUICK_HUDI_KILL_CONTRACTS) if contracts_dir else ''}")
    return kill_drill(landing, work / "kill" / sink, plan.kill_trials, plan.seed, progress, sink=sink,
                      contracts_dir=contracts_dir)


def run_cluster(plan: DrillPlan, work: Path, sink: str = "parquet") -> dict[str, Any]:
    from benchmarks.cluster_drill import cluster_drill

    return cluster_drill(work / f"cluster-{sink}", customers=plan.cluster_customers,
                         records_per_file=plan.cluster_records_per_file,
                         files_per_batch=plan.cluster_files_per_batch, seed=plan.seed % 1000, progress=progress,
                         sink=sink)


def run_s3a(plan: DrillPlan, work: Path, quick: bool, sink: str) -> dict[str, Any]:
    from benchmarks.s3a_drill import CRASH_POINTS, s3a_drill

    # The kill drill's landing set and contracts: the quick Hudi run writes one raw table.
    contracts_dir = None if sink == "parquet" or plan.hudi_kill_all_contracts else quick_contracts(work / "s3a")
    return s3a_drill(work / f"s3a-{sink}", files=plan.kill_files, records_per_file=plan.kill_records_per_file,
                     seed=plan.seed % 1000, sink=sink, contracts_dir=contracts_dir,
                     crash_points=CRASH_POINTS[:1] if quick else CRASH_POINTS, progress=progress)


def run_dbt_drills(plan: DrillPlan, work: Path) -> dict[str, Any]:
    from benchmarks.dbt_drills import incremental_equals_full_refresh, killed_build_keeps_previous_tables

    progress(f"dbt drills: {plan.dbt_histories} random histories of {plan.dbt_batches} batches, then a killed build")
    equal = incremental_equals_full_refresh(work / "dbt", plan.dbt_histories, plan.dbt_batches, plan.dbt_keys,
                                            plan.seed, progress)
    killed = killed_build_keeps_previous_tables(work / "dbt", plan.dbt_keys, plan.seed + 1)
    progress(f"dbt killed build: {killed['summary']}")
    return {"dbt_incremental_equals_full_refresh": equal, "dbt_killed_build": killed}


def summary_lines(results: dict[str, Any]) -> list[str]:
    lines = ["", "drill summary", "-" * 72]
    for name, section in results["drills"].items():
        status = "PASS" if section.get("passed") else ("ERROR" if "error" in section else "FAIL")
        detail = section.get("summary") or section.get("error", "")
        lines.append(f"{name:<38} {status:<5} {detail}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.drills", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few trials and examples (a few minutes)")
    parser.add_argument("--trials", type=int, help="kill -9 trials (default 20)")
    parser.add_argument("--only", help=f"comma-separated drills: {','.join(DRILLS)}")
    parser.add_argument("--sink", choices=SINK_CHOICES, default="both",
                        help="raw sink of the kill, cluster and s3a drills (default both: a section each)")
    parser.add_argument("--results-dir", type=Path, default=REPO_ROOT / "results")
    parser.add_argument("--work-dir", type=Path, help="scratch data (default <results-dir>/drills-work, removed after)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    plan = plan_from_args(args)
    # Absolute: the drills start processes in other working directories, where a relative
    # folder would name another place.
    results_dir: Path = args.results_dir.resolve()
    work: Path = (args.work_dir or results_dir / "drills-work").resolve()
    selected = prepare_run(args.only, DRILLS, results_dir, work)
    sinks = sinks_from_args(args.sink)
    results: dict[str, Any] = {"mode": "quick" if args.quick else "full", "sinks": list(sinks), "plan": asdict(plan),
                               "machine": machine_info(), "drills": {}}
    json_path = results_dir / "drills.json"

    def save() -> None:
        json_path.write_text(json.dumps(results, indent=2, default=str))

    def attempt(name: str, drill: Any) -> None:
        started = time.monotonic()
        try:
            outcome = drill()
        except Exception as exc:  # a drill that cannot run is reported, the others still run
            outcome = {name: {"passed": False, "error": f"{type(exc).__name__}: {str(exc)[:2000]}"}}
        for key, section in outcome.items():
            section.setdefault("seconds", time.monotonic() - started)
            results["drills"][key] = section
            progress(f"{key}: {'passed' if section.get('passed') else 'FAILED'} {section.get('summary', section.get('error', ''))}")
        save()

    started = time.monotonic()
    # Subprocess drills first, before this process starts a JVM of its own.
    for sink in sinks if "kill" in selected else ():
        name = section_name("kill_9", sink)
        attempt(name, lambda name=name, sink=sink: {name: run_kill(plan, work, sink)})
    for sink in sinks if "cluster" in selected else ():
        name = section_name("cluster_worker_kill", sink)
        attempt(name, lambda name=name, sink=sink: {name: run_cluster(plan, work, sink)})
    for sink in sinks if "s3a" in selected else ():
        name = section_name("s3a", sink)
        attempt(name, lambda name=name, sink=sink: {name: run_s3a(plan, work, args.quick, sink)})
    if {"fuzz", "property"} & set(selected):
        from streaming.runtime.spark_session import local_session

        spark = local_session(app_name="lakehouse-drills", master="local[2]")
        try:
            from benchmarks.decoder_drills import fuzz_drill, property_drill

            if "fuzz" in selected:
                progress(f"decoder fuzz: {plan.fuzz_bad} hostile records in {plan.fuzz_batches} batches")
                attempt("decoder_fuzz", lambda: {"decoder_fuzz": fuzz_drill(
                    spark, work / "fuzz", plan.fuzz_bad, plan.fuzz_good_customers, plan.fuzz_batches, plan.seed % 1000)})
            if "property" in selected:
                progress(f"property test: {plan.property_examples} hypothesis examples")
                attempt("ordering_property", lambda: {"ordering_property": property_drill(
                    spark, work / "property", plan.property_examples, plan.property_staging_examples)})
        finally:
            spark.stop()
    if "dbt" in selected:
        attempt("dbt", lambda: run_dbt_drills(plan, work))
    results["total_seconds"] = time.monotonic() - started
    results["passed"] = all(section.get("passed") for section in results["drills"].values())
    save()
    from benchmarks.plots import plot_drills

    plot_drills(results, results_dir / "drills.png")
    shutil.rmtree(work, ignore_errors=True)
    for line in summary_lines(results):
        print(line)
    progress(f"done in {results['total_seconds']:.0f}s: {json_path}, {results_dir / 'drills.png'}")
    return 0 if results["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
