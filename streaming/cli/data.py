"""Commands on the data directory's stream: generate, stream, status, demo."""
from __future__ import annotations

import argparse

from streaming.cli.options import (
    add_batch_size_options,
    add_sink_option,
    interval_argument,
    non_negative_int,
    positive_int,
)
from streaming.io.layout import DataLayout
from streaming.runtime.spark_session import DEFAULT_MASTER
from streaming.samples.generator import LANDING_LAYOUTS, RECORD_FORMATS


def add_commands(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    gen = commands.add_parser("generate", parents=[common], help="land sample DynamoDB CDC as JSON lines")
    gen.add_argument("--seed", type=int, default=7, help="random seed: the same seed writes the same records")
    gen.add_argument("--customers", type=positive_int, default=200, help="customers to create (default: 200)")
    gen.add_argument("--orders-per-customer", type=positive_int, default=3,
                     help="orders per customer (default: 3)")
    gen.add_argument("--tenants", type=non_negative_int, default=None,
                     help="tenants of the single-table app sample (default: one per ten customers; 0: none)")
    gen.add_argument("--records-per-file", type=int, default=500,
                     help="change records per landing file (default: 500)")
    gen.add_argument("--format", dest="record_format", choices=RECORD_FORMATS, default="mixed",
                     help="DynamoDB Streams records, Kinesis Data Streams records, or both")
    gen.add_argument("--layout", dest="file_layout", choices=LANDING_LAYOUTS, default="jsonl",
                     help="jsonl: cdc-<n>.jsonl, a record per line; firehose: Firehose object names, "
                          "records concatenated without delimiter")
    gen.add_argument("--gzip", action="store_true", help="GZIP each file and add .gz, as Firehose does")
    gen.set_defaults(run=generate)

    run = commands.add_parser("stream", parents=[common], help="stream landing files into the raw tables")
    run.add_argument("--trigger", choices=("available-now", "processing-time"), default="available-now",
                     help="available-now: read what has landed, then stop (the default); processing-time: "
                          "a micro-batch every --interval until stopped")
    run.add_argument("--interval", type=interval_argument, default="100 seconds",
                     help="micro-batch interval for processing-time, e.g. '30 seconds'")
    add_sink_option(run)
    add_batch_size_options(run)
    run.add_argument("--catalog", metavar="thrift://HOST:PORT", default=None,
                     help="sync every Hudi commit to this Hive metastore, as the Glue job syncs to the Glue Data "
                          "Catalog: the local Athena's, which `make athena-local` prints (default: no catalog)")
    run.add_argument("--master", default=None,
                     help=f"Spark master URL, e.g. spark://host:7077 or yarn "
                          f"(default: spark-submit's --master, else {DEFAULT_MASTER})")
    run.set_defaults(run=stream)

    commands.add_parser("status", parents=[common], help="row counts of raw tables and quarantine reasons") \
        .set_defaults(run=status)

    demo = commands.add_parser(
        "demo", parents=[common], help="generate -> stream -> counts -> dbt build -> mart summary, from scratch"
    )
    demo.add_argument("--skip-dbt", action="store_true", help="stop after the raw layer")
    demo.add_argument("--seed", type=int, default=7, help="random seed of the sample records")
    demo.add_argument("--customers", type=positive_int, default=200, help="customers to create (default: 200)")
    demo.add_argument("--tenants", type=non_negative_int, default=None,
                      help="tenants of the single-table app sample (default: one per ten customers; 0: none)")
    add_sink_option(demo)
    demo.set_defaults(run=demo_run)


def generate(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.demo import generate as generate_landing

    generate_landing(layout, seed=args.seed, customers=args.customers, tenants=args.tenants,
                     orders_per_customer=args.orders_per_customer,
                     records_per_file=args.records_per_file, record_format=args.record_format,
                     file_layout=args.file_layout, gzip=args.gzip)


def stream(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.stream import stream as stream_landing

    stream_landing(layout, trigger=args.trigger, interval=args.interval, sink=args.sink,
                   max_files_per_trigger=args.max_files_per_trigger, max_bytes_per_trigger=args.max_bytes_per_trigger,
                   catalog=args.catalog, contracts_dir=args.contracts_dir, master=args.master)


def status(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.status import status as raw_status

    report = raw_status(layout, contracts_dir=args.contracts_dir)
    for line in [*report.lines(), *report.commit_lines()]:
        print(line)


def demo_run(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.demo import run_demo

    run_demo(layout, seed=args.seed, customers=args.customers, tenants=args.tenants, sink=args.sink,
             contracts_dir=args.contracts_dir, build_marts=not args.skip_dbt)
