"""`make bench`: throughput, per-stage cost, the Hudi writes, a Hudi batch per raw table count, ours against the source article's job (seed), routing cost, scaling, micro-batch cost, dbt incremental, memory, freshness.

    python -m benchmarks.run [--sizes 100000,1000000,2000000] [--sinks parquet,hudi] [--quick] [--dbt-rows N] ...

Every figure is a ratio of two measurements taken in this run on the same generated
data, each Spark case in a fresh subprocess. Results: results/bench.json (rewritten
after every section, so a long run keeps what it measured), results/bench.png and a
table on stdout.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.datasets import LandingSet, generate_landing, prefix_set, replicated_set
from benchmarks.figures import batch_growth, throughput_figures
from benchmarks.freshness import measure_freshness
from benchmarks.hudi_tables import TABLE_COUNTS, measure_configuration
from benchmarks.measure import REPO_ROOT, CaseRun, machine_info, prepare_run, run_case, stream_run
from benchmarks.routing_cost import measure_routing
from benchmarks.seed_job import measure_seed, seed_line
from benchmarks.stages import HUDI_AS_CONFIGURED, HUDI_REFERENCE, HUDI_VARIANTS

TARGET_JOB_OVER_COPY = 0.8
TARGET_INCREMENTAL_OVER_FULL = 0.2
# Routing a single-table design's records to their entities' raw tables, as a share of the job's time.
TARGET_ROUTING_SHARE = 0.1
GiB = 1024**3
SINKS = ("parquet", "hudi")


@dataclass(frozen=True)
class BenchPlan:
    sizes: tuple[int, ...]
    copy_formats: tuple[str, ...]
    microbatches: int
    microbatch_records: int
    dbt_rows: int
    memory_events: int
    memory_driver_memory: str
    # None: the stream's default byte budget decides the files per batch.
    memory_files_per_trigger: int | None
    freshness_files: int
    freshness_trigger_s: int
    freshness_drop_interval_s: float
    scaling_events: int = 1_000_000
    # New raw change rows per dbt increment; None: 1 % of dbt_rows.
    dbt_new_rows: int | None = None
    microbatch_masters: tuple[str, ...] = ("local[2]", "local[1]")
    records_per_file: int = 500
    # App-table records of the routing-cost comparison, and runs of each of its two variants.
    routing_events: int = 1_000_000
    routing_rounds: int = 2
    # Records of the per-stage profile (benchmarks/stages.py), a prefix of the largest set.
    stages_events: int = 500_000
    # The raw sinks the throughput case runs the job on, each beside the same copies. Hudi
    # is left out by default: its commits take seconds each, twelve a batch, which at the
    # default sizes would add more than the whole run takes.
    sinks: tuple[str, ...] = ("parquet",)
    # Records of the Hudi lens's batch (benchmarks/stages.py, profile_hudi_writes), a
    # prefix of the generated set, and runs of each of its variants.
    hudi_events: int = 200_000
    hudi_rounds: int = 2
    # Names of benchmarks.stages.HUDI_VARIANTS to run; None: all of them.
    hudi_variants: tuple[str, ...] | None = None
    # The `hudi-tables` section (benchmarks/hudi_tables.py): one batch on the Hudi sink of
    # each size at each raw table count, sizes outermost (the smaller ones finish first).
    hudi_table_sizes: tuple[int, ...] = (10_000, 200_000)
    hudi_table_counts: tuple[int, ...] = TABLE_COUNTS
    # The `seed` section (benchmarks/seed_job.py): our job on Hudi and on Parquet and the
    # source article's job over the same files, each size at each raw table count.
    seed_sizes: tuple[int, ...] = (200_000,)
    seed_table_counts: tuple[int, ...] = TABLE_COUNTS


def plan_from_args(args: argparse.Namespace) -> BenchPlan:
    if args.quick:
        plan = BenchPlan(sizes=(20_000,), copy_formats=("json", "json-schema", "text"), microbatches=5, microbatch_records=500,
                         dbt_rows=100_000, memory_events=20_000, memory_driver_memory="1g",
                         memory_files_per_trigger=40, freshness_files=3, freshness_trigger_s=3,
                         freshness_drop_interval_s=2.3, scaling_events=20_000,
                         microbatch_masters=("local[2]",), routing_events=20_000, routing_rounds=1,
                         stages_events=20_000, hudi_events=20_000, hudi_rounds=1, hudi_table_sizes=(2_000,),
                         seed_sizes=(2_000,), seed_table_counts=(2,))
    else:
        plan = BenchPlan(sizes=(100_000, 1_000_000, 2_000_000), copy_formats=("json", "json-schema", "text"), microbatches=50,
                         microbatch_records=20_000, dbt_rows=10_000_000, memory_events=10_000_000,
                         memory_driver_memory="1g", memory_files_per_trigger=None, freshness_files=10,
                         freshness_trigger_s=10, freshness_drop_interval_s=7.0)
    overrides = {
        "sizes": tuple(int(size) for size in args.sizes.split(",")) if args.sizes else None,
        "dbt_rows": args.dbt_rows,
        "dbt_new_rows": args.dbt_new_rows,
        "memory_events": args.memory_events,
        "memory_driver_memory": args.driver_memory,
        "microbatches": args.microbatches,
        "scaling_events": args.scaling_events,
        "freshness_files": args.freshness_files,
        "routing_events": args.routing_events,
        "routing_rounds": args.routing_rounds,
        "stages_events": args.stages_events,
        "sinks": tuple(args.sinks.split(",")) if args.sinks else None,
        "hudi_events": args.hudi_events,
        "hudi_rounds": args.hudi_rounds,
        "hudi_variants": tuple(args.hudi_variants.split(",")) if args.hudi_variants else None,
        "hudi_table_sizes": tuple(int(size) for size in args.hudi_table_sizes.split(",")) if args.hudi_table_sizes else None,
        "hudi_table_counts": (tuple(int(count) for count in args.hudi_table_counts.split(","))
                              if args.hudi_table_counts else None),
        "seed_sizes": tuple(int(size) for size in args.seed_sizes.split(",")) if args.seed_sizes else None,
        "seed_table_counts": (tuple(int(count) for count in args.seed_table_counts.split(","))
                              if args.seed_table_counts else None),
    }
    plan = BenchPlan(**{**asdict(plan), **{key: value for key, value in overrides.items() if value is not None}})
    unknown = set(plan.sinks) - set(SINKS)
    if unknown or not plan.sinks:
        raise SystemExit(f"--sinks takes a comma-separated choice of {', '.join(SINKS)}, not {args.sinks!r}")
    unknown = set(plan.hudi_variants or ()) - set(HUDI_VARIANTS)
    if unknown:
        raise SystemExit(f"--hudi-variants takes names of {', '.join(HUDI_VARIANTS)}, not {sorted(unknown)}")
    if not plan.seed_table_counts or set(plan.seed_table_counts) - set(TABLE_COUNTS):
        raise SystemExit(f"--seed-table-counts takes a comma-separated choice of {', '.join(map(str, TABLE_COUNTS))}, "
                         f"not {args.seed_table_counts!r}")
    if not plan.hudi_table_counts or set(plan.hudi_table_counts) - set(TABLE_COUNTS):
        raise SystemExit(f"--hudi-table-counts takes a comma-separated choice of {', '.join(map(str, TABLE_COUNTS))}, "
                         f"not {args.hudi_table_counts!r}")
    return plan


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def copy_run(landing: LandingSet, out_dir: Path, master: str, fmt: str) -> CaseRun:
    shutil.rmtree(out_dir, ignore_errors=True)
    return run_case("copy", {"label": f"copy-{fmt}", "landing_dir": str(landing.root), "out_dir": str(out_dir),
                             "master": master, "format": fmt})


def measure_throughput(landing: LandingSet, work: Path, master: str, copy_formats: tuple[str, ...],
                       sinks: tuple[str, ...] = ("parquet",)) -> dict[str, Any]:
    """The job on each sink and each plain copy over the same landing files, one fresh
    process each. The row's own figures are the first sink's; `by_sink` holds every sink's."""
    jobs = {}
    for sink in sinks:
        jobs[sink] = stream_run(landing, work / f"job-{sink}", master, label=f"job-{sink}-{master}", sink=sink)
        shutil.rmtree(work / f"job-{sink}", ignore_errors=True)
    landed = {sink: job.result["landed_by_table"] for sink, job in jobs.items()}
    if len({json.dumps(rows, sort_keys=True) for rows in landed.values()}) > 1:
        raise RuntimeError(f"the sinks landed different rows of the same files: {landed}")
    copies = {fmt: copy_run(landing, work / f"copy-{fmt}", master, fmt) for fmt in copy_formats}
    copy_seconds = {fmt: run.result["seconds"] for fmt, run in copies.items()}
    by_sink = {
        sink: {**throughput_figures(landing.records, job.result["seconds"], copy_seconds),
               "peak_rss_bytes": job.peak_rss_bytes, "peak_pss_bytes": job.peak_pss_bytes,
               "cpu_seconds": job.result["cpu_seconds"],
               "batches": len(job.result["batch_seconds"])}
        for sink, job in jobs.items()
    }
    first = jobs[sinks[0]]
    figures = throughput_figures(landing.records, first.result["seconds"], copy_seconds)
    figures.update({
        "master": master,
        "sink": sinks[0],
        "files": len(landing.files),
        "job_peak_rss_bytes": first.peak_rss_bytes,
        "job_peak_pss_bytes": first.peak_pss_bytes,
        "copy_peak_rss_bytes": {fmt: run.peak_rss_bytes for fmt, run in copies.items()},
        "copy_peak_pss_bytes": {fmt: run.peak_pss_bytes for fmt, run in copies.items()},
        "landed": first.result["landed"],
        "landed_by_table": first.result["landed_by_table"],
        "quarantined": first.result["quarantined"],
        "by_sink": by_sink,
    })
    if {"parquet", "hudi"} <= set(jobs):
        figures["hudi_over_parquet"] = by_sink["hudi"]["job_events_per_s"] / by_sink["parquet"]["job_events_per_s"]
    for fmt in copy_formats:
        shutil.rmtree(work / f"copy-{fmt}", ignore_errors=True)
    return figures


def folder_name(text: str) -> str:
    """`text` as a folder name without glob characters: the sink lists its batch folders
    with Hadoop's glob, which reads the `[2]` of `local[2]` in a data path as a pattern."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def measure_microbatches(landing: LandingSet, work: Path, master: str) -> dict[str, Any]:
    """One file per trigger over the whole set: does a batch's cost grow with the table?"""
    data_dir = work / f"microbatch-{folder_name(master)}"
    run = stream_run(landing, data_dir, master, label=f"microbatch-{master}", max_files_per_trigger=1)
    seconds = run.result["batch_seconds"]
    shutil.rmtree(data_dir, ignore_errors=True)
    return {"master": master, "batch_seconds": seconds, "batch_records": run.result["batch_records"],
            "events_per_s": landing.records / run.result["seconds"], **batch_growth(seconds)}


def measure_memory(base: LandingSet, work: Path, plan: BenchPlan) -> dict[str, Any]:
    copies = max(1, round(plan.memory_events / base.records))
    landing = replicated_set(base, copies, work / "landing-memory")
    run = stream_run(landing, work / "memory", "local[2]", label="memory",
                     max_files_per_trigger=plan.memory_files_per_trigger, driver_memory=plan.memory_driver_memory)
    shutil.rmtree(work / "memory", ignore_errors=True)
    shutil.rmtree(landing.root, ignore_errors=True)
    return {"events": landing.records, "driver_memory": plan.memory_driver_memory,
            "max_files_per_trigger": plan.memory_files_per_trigger, "batches": len(run.result["batch_seconds"]),
            "files_per_trigger": run.result["files_per_trigger"],
            "peak_rss_bytes": run.peak_rss_bytes, "peak_pss_bytes": run.peak_pss_bytes,
            "seconds": run.result["seconds"], "events_per_s": landing.records / run.result["seconds"]}


def measure_dbt(work: Path, rows: int, new_rows: int | None = None) -> dict[str, Any]:
    data_dir = work / "dbt"
    shutil.rmtree(data_dir, ignore_errors=True)
    run = run_case("dbt", {"data_dir": str(data_dir), "rows": rows, "new_rows": new_rows})
    shutil.rmtree(data_dir, ignore_errors=True)
    return {**run.result, "peak_rss_bytes": run.peak_rss_bytes}


def _fmt_ratio(value: float, target: float, *, at_most: bool = False) -> str:
    ok = value <= target if at_most else value >= target
    return f"{value:.2f} ({'meets' if ok else 'misses'} {'<=' if at_most else '>='} {target})"


def summary_lines(results: dict[str, Any]) -> list[str]:
    lines = ["", "benchmark summary (ratios measured in this run)", "-" * 72]
    for row in results.get("throughput", []):
        for sink, figures in row.get("by_sink", {row.get("sink", "parquet"): row}).items():
            ratios = "  ".join(f"job/{fmt} copy={ratio:.2f}" for fmt, ratio in figures["ratio_to_copy"].items())
            lines.append(f"throughput {row['master']:<8} {row['events']:>10,} events  job ({sink}) "
                         f"{figures['job_events_per_s']:>10,.0f} ev/s  {ratios}")
        if "hudi_over_parquet" in row:
            lines.append(f"  job on hudi / job on parquet: {row['hudi_over_parquet']:.2f}")
    if results.get("throughput"):
        largest = max(results["throughput"], key=lambda row: (row["master"] == "local[2]", row["events"]))
        # The target is set against read.json + write Parquet; the text copy is a lower floor.
        floor = "json" if "json" in largest["ratio_to_copy"] else "text"
        lines.append(f"  job/{floor} copy at {largest['events']:,} events: "
                     f"{_fmt_ratio(largest['ratio_to_copy'][floor], TARGET_JOB_OVER_COPY)}")
        if "json-schema" in largest["ratio_to_copy"]:
            # The same copy without its schema-inference pass: the figure cannot look better than it is.
            lines.append(f"  job/json-schema copy (the stricter floor) at {largest['events']:,} events: "
                         f"{largest['ratio_to_copy']['json-schema']:.2f}")
    lines += hudi_lines(results.get("hudi"))
    lines += [hudi_tables_line(row) for row in results.get("hudi-tables", [])]
    lines += [seed_line(row) for row in results.get("seed", [])]
    routing = results.get("routing")
    if routing:
        lines.append(f"routing    {routing['events']:,} app events: routed (4 raw tables) {routing['routed_seconds']:.1f}s, "
                     f"flat (1) {routing['flat_seconds']:.1f}s; routing share of the job "
                     f"{_fmt_ratio(routing['routing_share'], TARGET_ROUTING_SHARE, at_most=True)}")
        lines.append(f"           CPU seconds of the job's processes: routed {routing['routed_cpu_seconds']:.1f}, "
                     f"flat {routing['flat_cpu_seconds']:.1f}; routing share "
                     f"{_fmt_ratio(routing['routing_cpu_share'], TARGET_ROUTING_SHARE, at_most=True)}")
    stages = results.get("stages")
    if stages:
        costs = "  ".join(f"{stage} {stages['us_per_record'][stage]:.1f}" for stage in stages["us_per_record"])
        lines.append(f"stages     {stages['records']:,} events, us per record (wall, all cores): {costs}")
    scaling = results.get("scaling")
    if scaling:
        lines.append(f"scaling    local[2]/local[1] job speed-up {scaling['job_speedup']:.2f}, copy speed-up {scaling['copy_speedup']:.2f}")
    for row in results.get("microbatches", []):
        lines.append(f"micro-batches {row['master']:<8} {row['batches']} batches  first-{row['window']} mean {row['first_mean_s']:.2f}s"
                     f"  last-{row['window']} mean {row['last_mean_s']:.2f}s  last/first {row['last_over_first']:.2f}"
                     f"  slope {row['slope_s_per_batch'] * 1000:+.1f} ms/batch")
    dbt = results.get("dbt")
    if dbt:
        lines.append(f"dbt        {dbt['rows']:,} raw change rows +{dbt['new_rows']:,}: incremental {dbt['incremental_build']['seconds']:.1f}s"
                     f" full-refresh {dbt['full_refresh_build']['seconds']:.1f}s  ratio {_fmt_ratio(dbt['ratio'], TARGET_INCREMENTAL_OVER_FULL, at_most=True)}")
        lines.append(f"           staging models only: ratio {dbt['staging_ratio']:.2f}; incremental == full refresh: {dbt['incremental_equals_full_refresh']}")
        reads = dbt.get("incremental_raw_reads")
        if reads:
            lines.append(f"           raw read by the incremental build: {reads['bytes_read'] / reads['raw_bytes']:.2f} x the raw "
                         f"change logs' bytes ({reads['bytes_read']:,} of {reads['raw_bytes']:,} B; "
                         f"{reads['files_read']} of {reads['raw_files']} files opened)")
            if reads.get("new_batch_bytes"):
                lines.append(f"           = {reads['bytes_read'] / reads['new_batch_bytes']:.2f} x the new batch's bytes, "
                             f"{reads['bytes_read'] / reads['window_bytes']:.2f} x its look-back window's "
                             "(the earlier increment and the new batch)")
    memory = results.get("memory")
    if memory:
        lines.append(f"memory     {memory['events']:,} events, driver {memory['driver_memory']}: peak of the process tree "
                     f"{memory.get('peak_pss_bytes', 0) / GiB:.2f} GiB proportional (PSS), "
                     f"{memory['peak_rss_bytes'] / GiB:.2f} GiB resident (RSS) ({memory['batches']} batches of up to "
                     f"{memory.get('files_per_trigger', '?')} files)")
    for key in ("freshness", "freshness-hudi"):
        fresh = results.get(key)
        if fresh:
            lines.append(f"freshness  {fresh.get('sink', 'parquet')} sink, trigger {fresh['trigger_s']}s, "
                         f"{fresh['visible_files']}/{fresh['files']} files: "
                         f"p50 {fresh['p50_s']:.1f}s  p95 {fresh['p95_s']:.1f}s")
    return lines


def hudi_lines(hudi: dict[str, Any] | None) -> list[str]:
    """The lens's figures; each variant against the reference and the sink as configured,
    whichever of them ran."""
    if not hudi:
        return []
    best = hudi["best_seconds"]
    lines = [f"hudi       {hudi['records']:,} events, one batch, fastest of {hudi['rounds']}"
             + (f": '{HUDI_REFERENCE}' {best[HUDI_REFERENCE]:.1f}s, Hudi commits {hudi['hudi_share']:.0%} of it"
                if HUDI_REFERENCE in best else "")]
    for table, kinds in hudi["tables"].items():
        shares = "  ".join(f"{kind} {commit['seconds']:.1f}s ({commit['share']:.0%}, {commit['jobs']} jobs)"
                           for kind, commit in sorted(kinds.items()))
        lines.append(f"           {table:<22} {shares}")
    ratios = {HUDI_REFERENCE: hudi["over_reference"], HUDI_AS_CONFIGURED: hudi.get("over_as_configured", {})}
    for name, seconds in best.items():
        against = [f"{ratios[base][name]:.2f} x '{base}'" for base in ratios if base != name and name in ratios[base]]
        before = hudi.get("before_first_commit_seconds", {}).get(name)
        lines.append(f"           {name}: {seconds:.1f}s{': ' + ', '.join(against) if against else ''}"
                     f"{f'; {before:.1f}s before its first commit' if before is not None else ''}"
                     f"{'' if hudi['markers_kept'][name] else '  (batch markers LOST)'}")
    for name, error in hudi.get("failed", {}).items():
        lines.append(f"           {name}: FAILED {error.splitlines()[0][:200]}")
    return lines


def hudi_tables_line(row: dict[str, Any]) -> str:
    return (f"hudi-tables {row['records']:>8,} records {row['raw_tables']:>2} raw tables: batch {row['seconds']:.1f}s, "
            f"{row['commits']} commits summing {row['commit_seconds']:.1f}s over a {row['commit_span_seconds']:.1f}s span, "
            f"{row['seconds_per_commit']:.1f}s a commit ({row['batch_seconds_per_commit']:.1f}s of the batch a commit); "
            f"rows in {row['raw_tables_landed']} raw tables, {row['quarantined']:,} quarantined; "
            f"the priming batch before it {row['priming_seconds']:.1f}s"
            f"{'' if row['markers_kept'] else '  (batch markers LOST)'}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few batches (~2-3 minutes)")
    parser.add_argument("--sizes", help="comma-separated event counts (default 100000,1000000,2000000)")
    parser.add_argument("--dbt-rows", type=int, help="raw change rows for the dbt benchmark (default 10M)")
    parser.add_argument("--dbt-new-rows", type=int,
                        help="new rows per dbt increment (default 1%% of --dbt-rows); fixed, it shows the raw "
                             "bytes an incremental build reads against table size")
    parser.add_argument("--memory-events", type=int, help="events for the memory run (default 10M)")
    parser.add_argument("--driver-memory", help="spark.driver.memory of the memory run (default 1g)")
    parser.add_argument("--scaling-events", type=int, help="events of the local[1] vs local[2] run (default 1M)")
    parser.add_argument("--microbatches", type=int, help="micro-batches of the scaling series (default 50)")
    parser.add_argument("--freshness-files", type=int, help="files dropped in the freshness run (default 10)")
    parser.add_argument("--routing-events", type=int,
                        help="app-table events of the routing-cost comparison (default 1M)")
    parser.add_argument("--routing-rounds", type=int, help="runs of each routing variant (default 2; the fastest counts)")
    parser.add_argument("--stages-events", type=int,
                        help="records of the per-stage profile (default 500k; a prefix of the largest size)")
    parser.add_argument("--sinks", help="comma-separated raw sinks of the throughput case: parquet,hudi "
                                        "(default parquet; hudi adds minutes per size)")
    parser.add_argument("--hudi-events", type=int,
                        help="records of the Hudi lens's batch (default 200k; a prefix of the largest size)")
    parser.add_argument("--hudi-rounds", type=int, help="runs of each Hudi lens variant (default 2; the fastest counts)")
    parser.add_argument("--hudi-variants", help=f"comma-separated Hudi lens variants (default all: {','.join(HUDI_VARIANTS)})")
    parser.add_argument("--hudi-table-sizes", help="comma-separated records a batch of the hudi-tables section "
                                                   "(default 10000,200000)")
    parser.add_argument("--hudi-table-counts", help=f"comma-separated raw table counts of the hudi-tables section "
                                                    f"(default {','.join(map(str, TABLE_COUNTS))})")
    parser.add_argument("--seed-sizes", help="comma-separated records of the seed section's landing sets (default 200000)")
    parser.add_argument("--seed-table-counts", help=f"comma-separated raw table counts of the seed section "
                                                    f"(default {','.join(map(str, TABLE_COUNTS))})")
    parser.add_argument("--only", help="comma-separated sections: throughput,stages,hudi,hudi-tables,seed,routing,scaling,"
                                       "microbatches,dbt,memory,freshness,freshness-hudi")
    parser.add_argument("--results-dir", type=Path, default=REPO_ROOT / "results")
    parser.add_argument("--work-dir", type=Path, help="scratch data (default <results-dir>/bench-work, removed after)")
    return parser


SECTIONS = ("throughput", "stages", "hudi", "hudi-tables", "seed", "routing", "scaling", "microbatches", "dbt", "memory", "freshness",
            "freshness-hudi")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    plan = plan_from_args(args)
    results_dir: Path = args.results_dir
    work: Path = args.work_dir or results_dir / "bench-work"
    sections = prepare_run(args.only, SECTIONS, results_dir, work)
    results: dict[str, Any] = {"mode": "quick" if args.quick else "full", "plan": asdict(plan),
                               "machine": machine_info(), "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    json_path = results_dir / "bench.json"

    def save() -> None:
        json_path.write_text(json.dumps(results, indent=2, default=str))

    def section(name: str, measure: Any) -> None:
        """Run one section; a failure is recorded and the other sections still run."""
        try:
            results[name] = measure()
        except Exception as exc:  # report, not crash: a long run keeps what it measured
            progress(f"{name} FAILED: {type(exc).__name__}: {str(exc)[:1500]}")
            results.setdefault("errors", {})[name] = f"{type(exc).__name__}: {str(exc)[:3000]}"
        save()

    started = time.monotonic()
    base: LandingSet | None = None
    if {"throughput", "stages", "hudi", "hudi-tables", "seed", "scaling", "memory"} & set(sections):
        largest = (max(plan.sizes) if {"throughput", "scaling", "memory"} & set(sections)
                   else max(plan.stages_events if "stages" in sections else 0,
                            plan.hudi_events if "hudi" in sections else 0,
                            # A little more than its largest size: each size a prefix of whole files of the
                            # set, a batch holds as many records at every table count (hudi_tables.landing_for).
                            int(max(plan.hudi_table_sizes) * 1.05) if "hudi-tables" in sections else 0,
                            int(max(plan.seed_sizes) * 1.05) if "seed" in sections else 0))
        progress(f"generating {largest:,} landing records")
        base = generate_landing(work / "landing-base", largest, records_per_file=plan.records_per_file)
        progress(f"generated {base.records:,} records in {len(base.files)} files")
    if "throughput" in sections and base:
        def throughput() -> list[dict[str, Any]]:
            rows = results.setdefault("throughput", [])
            for size in plan.sizes:
                landing = prefix_set(base, size, work / f"landing-{size}")
                progress(f"throughput at {landing.records:,} events (job on {'/'.join(plan.sinks)}, "
                         f"{'/'.join(plan.copy_formats)} copy) ...")
                rows.append(measure_throughput(landing, work, "local[2]", plan.copy_formats, plan.sinks))
                save()
            return rows

        section("throughput", throughput)
    if "stages" in sections and base:
        def stages() -> dict[str, Any]:
            landing = prefix_set(base, min(plan.stages_events, base.records), work / "landing-stages")
            progress(f"stages: where the job's time goes, {landing.records:,} events ...")
            run = run_case("stages", {"label": "stages", "landing_dir": str(landing.root),
                                      "work_dir": str(work / "stages")})
            shutil.rmtree(work / "stages", ignore_errors=True)
            return run.result

        section("stages", stages)
    if "hudi" in sections and base:
        def hudi() -> dict[str, Any]:
            landing = prefix_set(base, min(plan.hudi_events, base.records), work / "landing-hudi")
            progress(f"hudi: the Hudi sink's commits in one batch of {landing.records:,} events, "
                     f"{plan.hudi_rounds} run(s) of each variant ...")
            run = run_case("hudi_writes", {"label": "hudi", "landing_dir": str(landing.root),
                                           "work_dir": str(work / "hudi"), "rounds": plan.hudi_rounds,
                                           "variants": plan.hudi_variants})
            shutil.rmtree(work / "hudi", ignore_errors=True)
            return run.result

        section("hudi", hudi)
    def table_count_grid(name: str, sizes: tuple[int, ...], counts: tuple[int, ...], measure: Any, line: Any,
                         doing: str) -> None:
        """A section of one measurement per size and raw table count, sizes outermost (the
        smaller ones finish first), each row saved as soon as it is measured."""
        def rows_of_grid() -> list[dict[str, Any]]:
            rows = results.setdefault(name, [])
            for size in sizes:
                for count in counts:
                    progress(f"{name}: {size:,} records into {count} raw tables: {doing} ...")
                    rows.append(measure(base, size, count, work))
                    progress(line(rows[-1]))
                    save()
            return rows

        section(name, rows_of_grid)

    if "hudi-tables" in sections and base:
        table_count_grid("hudi-tables", plan.hudi_table_sizes, plan.hudi_table_counts, measure_configuration,
                         hudi_tables_line, "one batch on the Hudi sink, after a priming batch")
    if "seed" in sections and base:
        table_count_grid("seed", plan.seed_sizes, plan.seed_table_counts, measure_seed, seed_line,
                         "our job on Hudi and on Parquet, then the source article's job")
    if "routing" in sections:
        def routing() -> dict[str, Any]:
            progress(f"routing: {plan.routing_events:,} app-table records, {plan.routing_rounds} run(s) each of the "
                     "routed and the flat contract ...")
            landing = generate_landing(work / "landing-routing", plan.routing_events,
                                       records_per_file=plan.records_per_file, seed=13, app_only=True)
            try:
                return measure_routing(landing, work, "local[2]", plan.routing_rounds)
            finally:
                shutil.rmtree(landing.root, ignore_errors=True)

        section("routing", routing)
    if "scaling" in sections and base:
        def scaling() -> dict[str, Any]:
            landing = prefix_set(base, min(plan.scaling_events, base.records), work / "landing-scaling")
            copy_formats = plan.copy_formats[:1]
            progress(f"scaling: job and {copy_formats[0]} copy at local[1] over {landing.records:,} events ...")
            one_core = measure_throughput(landing, work, "local[1]", copy_formats)
            two_cores = next((row for row in results.get("throughput", [])
                              if row["events"] == landing.records and row["master"] == "local[2]"), None)
            if two_cores is None:
                two_cores = measure_throughput(landing, work, "local[2]", copy_formats)
            return {
                "local[1]": one_core, "local[2]": two_cores,
                "job_speedup": two_cores["job_events_per_s"] / one_core["job_events_per_s"],
                "copy_speedup": (two_cores["copy_events_per_s"][copy_formats[0]]
                                 / one_core["copy_events_per_s"][copy_formats[0]]),
            }

        section("scaling", scaling)
    if "microbatches" in sections:
        def microbatches() -> list[dict[str, Any]]:
            records = plan.microbatches * plan.microbatch_records
            progress(f"micro-batch series: {plan.microbatches} files of {plan.microbatch_records:,} records")
            series = generate_landing(work / "landing-microbatches", records,
                                      records_per_file=plan.microbatch_records, seed=11)
            rows = results.setdefault("microbatches", [])
            for master in plan.microbatch_masters:
                progress(f"micro-batch series at {master} ...")
                rows.append(measure_microbatches(series, work, master))
                save()
            shutil.rmtree(series.root, ignore_errors=True)
            return rows

        section("microbatches", microbatches)
    if "dbt" in sections:
        increment = f"{plan.dbt_new_rows:,} rows" if plan.dbt_new_rows else "1%"
        progress(f"dbt: {plan.dbt_rows:,} raw change rows, build, +{increment} increments, incremental builds, "
                 "full refresh ...")
        section("dbt", lambda: measure_dbt(work, plan.dbt_rows, plan.dbt_new_rows))
    if "memory" in sections and base:
        progress(f"memory: {plan.memory_events:,} events with spark.driver.memory={plan.memory_driver_memory} ...")
        section("memory", lambda: measure_memory(base, work, plan))
    for name, sink in (("freshness", "parquet"), ("freshness-hudi", "hudi")):
        if name in sections:
            progress(f"{name}: {plan.freshness_files} files, trigger {plan.freshness_trigger_s}s, {sink} sink ...")
            section(name, lambda sink=sink: measure_freshness(
                work, files=plan.freshness_files, drop_interval_s=plan.freshness_drop_interval_s,
                trigger_s=plan.freshness_trigger_s, sink=sink))
    results["total_seconds"] = time.monotonic() - started
    save()
    from benchmarks.plots import plot_bench

    plot_bench(results, results_dir / "bench.png")
    shutil.rmtree(work, ignore_errors=True)
    for line in summary_lines(results):
        print(line)
    for name, error in results.get("errors", {}).items():
        print(f"{name}: ERROR {error.splitlines()[0]}")
    progress(f"done in {results['total_seconds']:.0f}s: {json_path}, {results_dir / 'bench.png'}")
    return 1 if results.get("errors") else 0


if __name__ == "__main__":
    sys.exit(main())
