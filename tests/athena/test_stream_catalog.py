"""`lakehouse stream --catalog thrift://…`: the local stream syncs each Hudi commit to the
local Athena's metastore through the Glue job's path (sync_mode "hms", HiveSyncTool run by
Hudi after the commit, told the metastore by hoodie.datasource.hive_sync.metastore.uris),
and a batch whose sync failed is synced when the stream replays it (HudiSink's retry,
run_meta_sync).

One DynamoDB table (customers, under a raw table name of its own so that the `synced`
lakehouse's `raw.customers` is not touched) is streamed three times into one data dir:
1. with a metastore that is lost once the stream started: the change log's commit is
   written, its sync fails, the batch fails;
2. with the engine's metastore: Spark replays the batch, the change log is not written a
   second time but synced, the current state is written and synced;
3. a second landing whose customer ids end in new characters: the current-state table's
   new partitions are in the metastore, and Trino reads them, after that commit. With it
   one stored customer is updated, which shows what docs/analysts.md says of an earlier
   state of raw on Athena.
After each, Trino's rows equal hudi-rs's.
"""
from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from engine_ports import free_port
from raw_tables import hudi_rs_table, metastore_uri, metastore_view, partition_folders, trino_and_hudi_rs_rows

from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR
from streaming.errors import OperatorError
from streaming.io import layout as raw_layout
from streaming.io.formats.hudi.timeline import LocalFiles, table_commits
from streaming.io.layout import DataLayout
from streaming.operations.stream import stream
from streaming.runtime.athena_local import HOST, query
from streaming.samples.generator import write_landing_files

pytestmark = pytest.mark.athena

RAW_TABLE = "catalog_customers"
CHANGE_LOG = f"{RAW_TABLE}_changes"


@contextmanager
def metastore_lost_after_start(metastore_port: int) -> Iterator[str]:
    """A thrift:// address that reaches the engine's metastore for its first connection
    (the stream's start creates the raw database through it) and hangs up on every later
    one, as a metastore lost after the start: Hudi's sync after the first commit fails."""
    listener = socket.create_server((HOST, free_port()))

    def pump(source: socket.socket, target: socket.socket) -> None:
        with source, target:
            while data := source.recv(65536):
                target.sendall(data)

    def serve() -> None:
        first = True
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            if not first:
                connection.close()
                continue
            first = False
            upstream = socket.create_connection((HOST, metastore_port))
            for source, target in ((connection, upstream), (upstream, connection)):
                threading.Thread(target=pump, args=(source, target), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"thrift://{HOST}:{listener.getsockname()[1]}"
    finally:
        listener.close()
        thread.join(timeout=10)


def customers_contract_as(folder: Path, raw_table: str) -> str:
    """The sample customers contract with its raw tables renamed, alone in `folder`."""
    document = yaml.safe_load((SAMPLE_CONTRACTS_DIR / "customers.yml").read_text())
    document["raw_table"] = raw_table
    folder.mkdir(parents=True)
    (folder / "customers.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    return str(folder)


def commit_instants(raw_dir: Path, table: str) -> list[str]:
    return [commit.instant for commit in table_commits(LocalFiles(), str(raw_dir / table))]


@dataclass(frozen=True)
class Replayed:
    layout: DataLayout
    raw_dir: Path
    contracts_dir: str
    failure: str
    change_log_commits_after_failure: list[str]
    current_state_after_failure: bool


@pytest.fixture(scope="module")
def replayed(engine, hudi_spark, tmp_path_factory) -> Replayed:
    """Steps 1 and 2: a batch whose sync failed after its commit, replayed with the engine's metastore."""
    _, state = engine
    work = tmp_path_factory.mktemp("stream-catalog")
    contracts_dir = customers_contract_as(work / "contracts", RAW_TABLE)
    layout = DataLayout(work / "data")
    # Ids cust-000000..2: the current state's partitions (the id's last character) 0, 1 and 2.
    write_landing_files(layout.landing, customers=3, orders_per_customer=1, tenants=0, seed=3)
    run = dict(sink="hudi", contracts_dir=contracts_dir, spark=hudi_spark, out=lambda _: None)
    with metastore_lost_after_start(state["metastore_port"]) as lost, pytest.raises(OperatorError) as failed:
        stream(layout, catalog=lost, **run)
    raw_dir = layout.root / raw_layout.RAW_FOLDER
    committed = commit_instants(raw_dir, CHANGE_LOG)
    current_state_written = (raw_dir / RAW_TABLE / ".hoodie").is_dir()
    stream(layout, catalog=metastore_uri(state), **run)
    return Replayed(layout, raw_dir, contracts_dir, str(failed.value), committed, current_state_written)


def test_a_batch_whose_sync_failed_after_its_commit_is_synced_not_rewritten_on_replay(engine, hudi_spark, replayed):
    _, state = engine
    # The failed run: the change log committed its batch, its sync failed, the current
    # state was never written. The command said so in one line naming the lost metastore.
    assert replayed.failure.startswith("the Hive metastore at thrift://") and "stopped answering" in replayed.failure
    assert len(replayed.failure.splitlines()) == 1
    assert len(replayed.change_log_commits_after_failure) == 1
    assert not replayed.current_state_after_failure
    # The replay: no second commit of the change log, yet both tables registered.
    assert commit_instants(replayed.raw_dir, CHANGE_LOG) == replayed.change_log_commits_after_failure
    catalog = metastore_view(hudi_spark, metastore_uri(state))
    for table in (CHANGE_LOG, RAW_TABLE):
        assert catalog[table]["partitions"] == partition_folders(replayed.raw_dir / table), table
        assert catalog[table]["last_synced"] == commit_instants(replayed.raw_dir, table)[-1], table
        on_trino, on_hudi_rs = trino_and_hudi_rs_rows(state["trino_port"], replayed.raw_dir, table)
        assert on_trino == on_hudi_rs and on_trino, table


def land_update_of(landing: Path, keys: dict, event_ms: int) -> None:
    """A MODIFY of the item `keys` (DynamoDB JSON) at `event_ms`, newer than all its
    changes, as Kinesis Data Streams for DynamoDB delivers it."""
    image = {**keys, "email": {"S": "updated@example.com"}}
    record = {"awsRegion": "eu-west-1", "eventID": "update-after-the-first-batches", "eventName": "MODIFY",
              "recordFormat": "application/json", "tableName": "customers", "eventSource": "aws:dynamodb",
              "dynamodb": {"ApproximateCreationDateTime": event_ms, "ApproximateCreationDateTimePrecision": "MILLISECOND",
                           "Keys": keys, "NewImage": image, "SizeBytes": len(json.dumps(image))}}
    newest_folder = max(path.parent for path in landing.rglob("cdc-*.jsonl"))
    (newest_folder / "cdc-update.jsonl").write_text(json.dumps(record) + "\n")


def test_new_partitions_are_in_trino_after_the_commit_that_made_them(engine, hudi_spark, replayed):
    _, state = engine
    port = state["trino_port"]
    before = metastore_view(hudi_spark, metastore_uri(state))[RAW_TABLE]["partitions"]
    assert before == partition_folders(replayed.raw_dir / RAW_TABLE)
    earlier = {table: commit_instants(replayed.raw_dir, table)[-1] for table in (CHANGE_LOG, RAW_TABLE)}
    # Ids cust-000000..7, with another seed: new customers, five of whose ids end in 3..7,
    # new partitions of the current state; and one update of a customer already stored.
    write_landing_files(replayed.layout.landing, customers=8, orders_per_customer=1, tenants=0, seed=4)
    _, stored = query(port, f'select id, cust_name, to_unixtime(max(_event_ts)) from "raw"."{CHANGE_LOG}" '
                            "group by id, cust_name order by 1, 2 limit 1")
    customer_id, name, newest_seconds = stored[0]
    land_update_of(replayed.layout.landing, {"id": {"S": customer_id}, "custName": {"S": name}},
                   int(newest_seconds * 1000) + 86_400_000)
    stream(replayed.layout, sink="hudi", catalog=metastore_uri(state), contracts_dir=replayed.contracts_dir,
           spark=hudi_spark, out=lambda _: None)
    after = metastore_view(hudi_spark, metastore_uri(state))[RAW_TABLE]
    new_partitions = sorted(set(after["partitions"]) - set(before))
    assert new_partitions == [(str(digit),) for digit in range(3, 8)]
    assert after["partitions"] == partition_folders(replayed.raw_dir / RAW_TABLE)
    assert after["last_synced"] == commit_instants(replayed.raw_dir, RAW_TABLE)[-1]
    _, read = query(port, f'select distinct id_suffix from "raw"."{RAW_TABLE}" where id_suffix > \'2\'')
    assert sorted(tuple(row) for row in read) == new_partitions
    for table in (CHANGE_LOG, RAW_TABLE):
        on_trino, on_hudi_rs = trino_and_hudi_rs_rows(port, replayed.raw_dir, table)
        assert on_trino == on_hudi_rs, table

    # docs/analysts.md, an earlier state of raw on Athena: `_hoodie_commit_time <= X` is the
    # change log as of X, but not the current state, where the updated customer is missing.
    on_trino, on_hudi_rs = trino_and_hudi_rs_rows(port, replayed.raw_dir, CHANGE_LOG, as_of=earlier[CHANGE_LOG])
    assert on_trino == on_hudi_rs
    _, filtered = query(port, f'select _hoodie_record_key from "raw"."{RAW_TABLE}" '
                              f"where _hoodie_commit_time <= '{earlier[RAW_TABLE]}'")
    as_of = hudi_rs_table(replayed.raw_dir, RAW_TABLE, earlier[RAW_TABLE]).column("_hoodie_record_key").to_pylist()
    assert sorted(set(as_of) - {key for (key,) in filtered}) == [f"id:{customer_id},cust_name:{name}"]
    assert {key for (key,) in filtered} < set(as_of)


def test_a_catalog_where_no_metastore_answers_is_refused_before_anything_is_written(tmp_path, hudi_spark):
    layout = DataLayout(tmp_path / "data")
    write_landing_files(layout.landing, customers=1, orders_per_customer=1, tenants=0, seed=3)
    silent = f"thrift://{HOST}:{free_port()}"
    with pytest.raises(OperatorError) as refused:
        stream(layout, sink="hudi", catalog=silent, contracts_dir=customers_contract_as(tmp_path / "contracts", RAW_TABLE),
               spark=hudi_spark, out=lambda _: None)
    message = str(refused.value)
    assert message.startswith(f"{silent} does not answer as a Hive metastore (") and "make athena-local" in message
    assert "\n" not in message
    assert not (layout.root / raw_layout.RAW_FOLDER / RAW_TABLE).exists()
