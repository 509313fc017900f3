"""`lakehouse scaffold`: what it writes for a plain table and for a single-table design,
that a re-run on an unchanged contract changes no byte, that hand edits are refused
(nothing written) unless --force, that the committed app models are its output, and that
the hand-written staging models and sources agree with its templates and the contracts'
metadata columns. No dbt runs here: tests/dbt/test_scaffold_round_trip.py builds what it
writes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from project_copy import copy_project

from streaming.cli import main
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.contracts.model import CHANGE_LOG_METADATA_COLUMNS
from streaming.errors import OperatorError
from streaming.operations import scaffold as scaffold_module
from streaming.operations.contract_pii import contract_columns
from streaming.operations.scaffold import CASTS_MACRO, PII_MACRO, ScaffoldRefused, scaffold, scaffold_files
from streaming.runtime.dbt_runner import PROJECT_DIR

STAGING = Path("dbt_project/models/staging")
SAMPLE_STAGING = STAGING / "samples"

WIDGETS_CONTRACT = """\
table: widgets
raw_table: widgets
description: Widgets on sale.
key:
  partition_key: widgetId
attributes:
  widgetId:
    type: S
    description: Widget id.
  price:
    type: N
    cast: decimal(10,2)
    description: Unit price.
  ownerEmail:
    type: S
    pii: true
    description: Who listed it.
  dimensions:
    type: M
    description: Size.
    fields:
      widthCm: {type: N, description: Width.}
partitioning:
  column: widget_bucket
  expression: "substring(widget_id, -1, 1)"
"""


@pytest.fixture
def widgets_contracts_dir(tmp_path: Path) -> Path:
    """The packaged contracts and widgets.yml, in a folder of their own."""
    folder = tmp_path / "contracts"
    shutil.copytree(SAMPLE_CONTRACTS_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (folder / "widgets.yml").write_text(WIDGETS_CONTRACT, encoding="utf-8")
    return folder


@pytest.fixture
def contracts_with_widgets(widgets_contracts_dir: Path) -> dict:
    return load_contracts(widgets_contracts_dir)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder holding the repository's hand-written source YAML (the one that
    declares customers and orders), as scaffold finds it in a real project."""
    root = tmp_path / "project"
    (root / SAMPLE_STAGING).mkdir(parents=True)
    shutil.copy(PROJECT_DIR / SAMPLE_STAGING / "_dynamodb__sources.yml", root / SAMPLE_STAGING)
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_plain_table_gets_staging_changes_sources_and_docs(contracts_with_widgets: dict, project: Path) -> None:
    result = scaffold("widgets", project_dir=project, contracts=contracts_with_widgets)

    assert sorted(map(str, result.written)) == sorted([
        "dbt_project/models/staging/stg_dynamodb__widgets.sql",
        "dbt_project/models/staging/stg_dynamodb__widgets_changes.sql",
        "dbt_project/models/staging/_dynamodb__widgets__sources.yml",
        "dbt_project/models/staging/_dynamodb__widgets__models.yml",
        str(CASTS_MACRO), str(PII_MACRO),
    ])
    model = (project / STAGING / "stg_dynamodb__widgets.sql").read_text()
    assert "unique_key=['widget_id']" in model
    assert "{{ composite_key(['widget_id']) }} as item_key" in model
    assert "{{ typed_by_contract('widgets', 'price') }} as price" in model
    assert "price as price_text" in model
    assert "quality_issues(contract_cast_issues('widgets', 'cleaned'))" in model
    assert "on cleaned.widget_id = existing.widget_id" in model
    sources = yaml.safe_load((project / STAGING / "_dynamodb__widgets__sources.yml").read_text())
    (source,) = sources["sources"]
    assert source["name"] == "dynamodb" and "raw" in source["schema"]
    tables = {table["name"]: table for table in source["tables"]}
    assert tables["widgets"]["meta"] == {"change_log": "widgets_changes", "key_columns": ["widget_id"]}
    columns = {column["name"]: column for column in tables["widgets_changes"]["columns"]}
    assert columns["dimensions"]["data_type"] == "struct(width_cm varchar)"
    assert columns["owner_email"]["description"] == "Who listed it. PII."
    assert columns["widget_id"]["description"] == "Widget id (partition key)."
    assert {"widget_bucket", "_ingest_hour", "_event_id"} <= set(columns)
    models = {model["name"]: model for model in yaml.safe_load(
        (project / STAGING / "_dynamodb__widgets__models.yml").read_text())["models"]}
    current = models["stg_dynamodb__widgets"]
    assert current["description"].startswith("Widgets on sale. Current state per key (widget_id)")
    assert current["data_tests"][0]["unique_combination"]["arguments"] == {"combination": ["widget_id"]}
    assert current["data_tests"][1]["holds_latest_raw_change"]["arguments"]["raw_table"] == "widgets_changes"
    by_column = {column["name"]: column for column in current["columns"]}
    assert [next(iter(test)) for test in by_column["item_key"]["data_tests"]] == ["unique", "not_null"]
    assert "decimal(10,2)" in by_column["price"]["description"]
    assert by_column["price"]["data_tests"] == [
        {"fits_contract_cast": {"config": {"where": "__changed_rows_only__", "severity": "warn"}}}]
    assert "price_invalid" in by_column["quality_issues"]["description"]
    events = {column["name"]: column for column in models["stg_dynamodb__widgets_changes"]["columns"]}
    assert [next(iter(test)) for test in events["_event_id"]["data_tests"]] == ["unique", "not_null"]
    assert '"widgets": {' in (project / PII_MACRO).read_text()


def test_entities_get_models_and_the_unrouted_table_only_sources() -> None:
    files = {str(generated.path): generated.text for generated in scaffold_files(load_contracts(), "app", history=True)}

    for entity in ("app_tenants", "app_users", "app_invoices"):
        assert f"dbt_project/models/staging/stg_dynamodb__{entity}.sql" in files
        assert f"dbt_project/models/staging/stg_dynamodb__{entity}_changes.sql" in files
        assert f"dbt_project/models/marts/dim_{entity}_history.sql" in files
    assert not [path for path in files if "stg_dynamodb__app_unrouted" in path or "dim_app_unrouted" in path]
    sources = yaml.safe_load(files["dbt_project/models/staging/_dynamodb__app__sources.yml"])
    tables = {table["name"]: table for table in sources["sources"][0]["tables"]}
    assert set(tables) == {name for raw in ("app_tenants", "app_users", "app_invoices", "app_unrouted")
                           for name in (raw, f"{raw}_changes")}
    assert "_change_record" in {column["name"] for column in tables["app_unrouted_changes"]["columns"]}
    assert "_change_record" not in {column["name"] for column in tables["app_users_changes"]["columns"]}
    invoices = {column["name"]: column for column in tables["app_invoices_changes"]["columns"]}
    assert invoices["lines"]["data_type"] == "struct(sku varchar, qty varchar)[]"
    # The history protects the contract's PII (users.email) and keys items by a keyed pseudonym.
    history = files["dbt_project/models/marts/dim_app_users_history.sql"]
    assert "{{ from_contract('app_users', 'email', 'email') }} as email" in history
    assert "{{ keyed_surrogate_key(['pk', 'sk'], 'item_key') }} as item_key" in history
    assert "typed_by_contract('app_users', 'last_login_at')" in history
    # The PII macro scaffold regenerates protects users.email in every mart that reads it.
    assert '"app_users": {' in files[str(PII_MACRO)]
    assert contract_columns(load_contracts())["app_users"]["pii"] == ["email"]
    # The change events keep the values as raw has them: nothing typed, nothing flagged.
    events = files["dbt_project/models/staging/stg_dynamodb__app_users_changes.sql"]
    assert "quality_issues" not in events and "typed_by_contract" not in events


def test_the_committed_app_models_are_what_scaffold_writes() -> None:
    for generated in scaffold_files(load_contracts(), "app", project_dir=PROJECT_DIR):
        assert (PROJECT_DIR / generated.path).read_text(encoding="utf-8") == generated.text, (
            f"{generated.path} differs from the app contract's scaffold: run lakehouse scaffold --table app"
        )


def _source_tables(path: Path) -> dict[str, dict]:
    (source,) = yaml.safe_load(path.read_text(encoding="utf-8"))["sources"]
    return {table["name"]: table for table in source["tables"]}


def test_every_sources_yaml_declares_the_contracts_metadata_columns() -> None:
    """The metadata columns are listed once, in contracts/model.py: the hand-written
    sources and the ones scaffold writes end every change log with them, in that order,
    with the same types and descriptions."""
    scaffolded = {str(generated.path): generated.text for generated in scaffold_files(load_contracts(), "app")}
    app_sources = yaml.safe_load(scaffolded["dbt_project/models/staging/_dynamodb__app__sources.yml"])
    change_logs = [table for table in app_sources["sources"][0]["tables"] if table["name"].endswith("_changes")]
    hand_written = _source_tables(PROJECT_DIR / SAMPLE_STAGING / "_dynamodb__sources.yml")
    change_logs += [hand_written["customers_changes"], hand_written["orders_changes"]]
    duckdb_types = {"string": "varchar", "boolean": "boolean", "timestamp": "timestamp", "bigint": "bigint"}
    expected = [{"name": column.name, "data_type": duckdb_types[column.sql_type], "description": column.description}
                for column in CHANGE_LOG_METADATA_COLUMNS]

    assert len(change_logs) == 6
    for table in change_logs:
        assert table["columns"][-len(expected):] == expected, table["name"]


def _select_step(sql: str, name: str) -> str:
    """A named step (CTE) of a model, from `<name> as (` to its closing parenthesis."""
    match = re.search(rf"^(?:with )?{name} as \(\n.*?^\),?$", sql, flags=re.DOTALL | re.MULTILINE)
    assert match is not None, f"no step {name}"
    return match.group(0)


def _shared_parts(sql: str, steps: tuple[str, ...], tail_start: str) -> list[str]:
    config = re.search(r"^\{\{ config\(.*?^\) \}\}$", sql, flags=re.DOTALL | re.MULTILINE)
    assert config is not None
    tail = sql[sql.index(tail_start):]
    return [config.group(0), *(_select_step(sql, step) for step in steps), tail[:tail.index("{%- endif %}")]]


@pytest.mark.parametrize(("table", "model", "steps", "tail_start"), [
    ("customers", "stg_dynamodb__customers", ("changes", "ranked", "latest"),
     "{%- if is_incremental() %}\nleft join {{ this }} as existing"),
    ("orders", "stg_dynamodb__orders", ("changes", "ranked", "latest"),
     "{%- if is_incremental() %}\nleft join {{ this }} as existing"),
    ("customers", "stg_dynamodb__customers_changes", ("changes",),
     "{%- if is_incremental() %}\nleft join {{ this }} as stored"),
])
def test_the_hand_written_staging_models_are_the_templates_but_for_the_stated_differences(
    table: str, model: str, steps: tuple[str, ...], tail_start: str
) -> None:
    """The templates' own comments list how the hand-written models differ (their
    `cleaned` step and final select, the customer events' columns); everything else,
    config, the steps that choose the raw rows and the incremental join, is the same text."""
    rendered = {generated.path.stem: generated.text for generated in scaffold_files(load_contracts(), table)}
    hand_written = (PROJECT_DIR / SAMPLE_STAGING / f"{model}.sql").read_text(encoding="utf-8")

    assert _shared_parts(hand_written, steps, tail_start) == _shared_parts(rendered[model], steps, tail_start)


def test_a_rerun_on_an_unchanged_contract_changes_no_byte(contracts_with_widgets: dict, project: Path) -> None:
    scaffold("widgets", project_dir=project, contracts=contracts_with_widgets, history=True)
    before = _files(project)
    times = {path: path.stat().st_mtime_ns for path in project.rglob("*") if path.is_file()}

    result = scaffold("widgets", project_dir=project, contracts=contracts_with_widgets, history=True)

    assert result.written == []
    assert len(result.unchanged) == 8
    assert _files(project) == before
    assert {path: path.stat().st_mtime_ns for path in project.rglob("*") if path.is_file()} == times


def _edit_contract(contracts: dict) -> dict:
    """The widgets contract with the price description changed: every widgets file changes."""
    import dataclasses

    widgets = contracts["widgets"]
    attributes = tuple(dataclasses.replace(spec, description="Unit price, VAT included.") if spec.name == "price"
                       else spec for spec in widgets.attributes)
    return {**contracts, "widgets": dataclasses.replace(widgets, attributes=attributes)}


def test_a_hand_edited_file_is_refused_by_name_and_nothing_is_written(contracts_with_widgets: dict, project: Path) -> None:
    scaffold("widgets", project_dir=project, contracts=contracts_with_widgets)
    model = project / STAGING / "stg_dynamodb__widgets.sql"
    model.write_text(model.read_text().replace("price as price_text", "price as price_as_sent"))
    before = _files(project)

    with pytest.raises(ScaffoldRefused) as refused:
        scaffold("widgets", project_dir=project, contracts=_edit_contract(contracts_with_widgets))

    message = str(refused.value)
    assert "dbt_project/models/staging/stg_dynamodb__widgets.sql: edited since scaffold wrote it" in message
    assert "--force" in message
    assert "stg_dynamodb__widgets_changes.sql" not in message  # not edited: not named
    assert _files(project) == before  # the sources YAML would change too, but nothing was written


def test_a_rerun_on_an_unchanged_contract_still_refuses_to_undo_hand_edits(contracts_with_widgets: dict, project: Path) -> None:
    scaffold("widgets", project_dir=project, contracts=contracts_with_widgets)
    sources = project / STAGING / "_dynamodb__widgets__sources.yml"
    sources.write_text(sources.read_text() + "# a note of mine\n")
    model = project / STAGING / "stg_dynamodb__widgets.sql"
    model.write_text(model.read_text() + "-- reviewed\n")

    with pytest.raises(ScaffoldRefused) as refused:
        scaffold("widgets", project_dir=project, contracts=contracts_with_widgets)
    assert "_dynamodb__widgets__sources.yml: edited since" in str(refused.value)
    assert "stg_dynamodb__widgets.sql: edited since" in str(refused.value)
    assert sources.read_text().endswith("# a note of mine\n")
    assert model.read_text().endswith("-- reviewed\n")


def test_force_overwrites_hand_edits_with_the_contracts_text(contracts_with_widgets: dict, project: Path) -> None:
    scaffold("widgets", project_dir=project, contracts=contracts_with_widgets)
    model = project / STAGING / "stg_dynamodb__widgets.sql"
    model.write_text("select 1 as hand_written\n")  # no scaffold header at all

    with pytest.raises(ScaffoldRefused, match="stg_dynamodb__widgets.sql: not written by scaffold"):
        scaffold("widgets", project_dir=project, contracts=contracts_with_widgets)
    result = scaffold("widgets", project_dir=project, contracts=_edit_contract(contracts_with_widgets), force=True)

    assert Path("dbt_project/models/staging/stg_dynamodb__widgets.sql") in result.written
    expected = {str(generated.path): generated.text
                for generated in scaffold_files(_edit_contract(contracts_with_widgets), "widgets")}
    assert model.read_text() == expected[str(STAGING / "stg_dynamodb__widgets.sql")]
    assert "Unit price, VAT included" in (project / STAGING / "_dynamodb__widgets__sources.yml").read_text()
    # Written by scaffold again: the next run without --force accepts it.
    assert scaffold("widgets", project_dir=project, contracts=_edit_contract(contracts_with_widgets)).written == []


def test_tables_with_hand_written_sources_are_refused(project: Path) -> None:
    with pytest.raises(ScaffoldRefused, match=r"_dynamodb__sources\.yml declares source dynamodb\.customers"):
        scaffold("customers", project_dir=project, contracts=load_contracts())
    assert not (project / STAGING / "_dynamodb__customers__sources.yml").exists()


def test_an_unknown_table_names_the_known_ones(project: Path) -> None:
    with pytest.raises(OperatorError, match=r"'shop'.*\['app', 'customers', 'orders'\]"):
        scaffold("shop", project_dir=project, contracts=load_contracts())


def test_the_cli_passes_table_history_and_force(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    calls = []
    monkeypatch.setattr(scaffold_module, "scaffold", lambda table, **options: calls.append((table, options)))
    assert main(["scaffold", "--table", "app", "--history", "--force"]) == 0
    ((table, options),) = calls
    assert (table, options["history"], options["force"]) == ("app", True, True)

    def refuse(table: str, **options) -> None:
        raise ScaffoldRefused("would overwrite x.sql")

    monkeypatch.setattr(scaffold_module, "scaffold", refuse)
    assert main(["scaffold", "--table", "app"]) == 2
    assert "lakehouse scaffold: would overwrite x.sql" in capsys.readouterr().err


def test_the_cli_scaffolds_from_the_contracts_dir_it_is_given(
    monkeypatch: pytest.MonkeyPatch, widgets_contracts_dir: Path, project: Path
) -> None:
    """Issue 30 item 14: --contracts-dir was ignored, so a table only it describes was unknown."""
    real = scaffold_module.scaffold
    monkeypatch.setattr(scaffold_module, "scaffold", lambda table, **options: real(table, project_dir=project, **options))

    assert main(["scaffold", "--table", "widgets", "--contracts-dir", str(widgets_contracts_dir)]) == 0

    assert (project / STAGING / "stg_dynamodb__widgets.sql").is_file()
    # The contract macros cover the folder's contracts, the widgets' cast and PII flag too.
    assert '"widgets": {' in (project / CASTS_MACRO).read_text()
    assert '"widgets": {' in (project / PII_MACRO).read_text()


def test_scaffold_without_the_contracts_of_a_table_scaffolded_before_is_refused(
    contracts_with_widgets: dict, project: Path
) -> None:
    """The contract macros scaffold rewrites come from the contracts it is given: without
    widgets.yml they would lose the widgets' casts, and its models would no longer compile."""
    scaffold("widgets", project_dir=project, contracts=contracts_with_widgets)
    before = _files(project)

    with pytest.raises(ScaffoldRefused) as refused:
        scaffold("app", project_dir=project, contracts=load_contracts(SAMPLE_CONTRACTS_DIR))

    message = str(refused.value)
    assert "_dynamodb__widgets__sources.yml declares source dynamodb.widgets_changes" in message
    assert "--contracts-dir" in message
    assert _files(project) == before


@pytest.mark.parametrize(("text", "kind"), [("- version: 2\n", "list"), ("just text\n", "str")])
def test_a_models_yaml_that_is_not_a_mapping_is_refused_by_name(
    contracts_with_widgets: dict, project: Path, text: str, kind: str
) -> None:
    """Issue 30 item 15: such a file raised an AttributeError."""
    (project / STAGING / "notes.yml").write_text(text, encoding="utf-8")

    with pytest.raises(ScaffoldRefused, match=rf"staging/notes\.yml: its top level is a {kind}, not the mapping"):
        scaffold("widgets", project_dir=project, contracts=contracts_with_widgets)
    assert not (project / STAGING / "stg_dynamodb__widgets.sql").exists()


SENSORS_CONTRACT = """\
table: sensors
raw_table: sensors
description: Readings.
key:
  partition_key: sensorId
  sort_key: readingAt
attributes:
  sensorId: {type: N, cast: bigint, description: Sensor.}
  readingAt: {type: S, description: When.}
  probe:
    type: M
    description: Probe.
    fields:
      calibration:
        type: M
        description: Calibration.
        fields:
          drift: {type: N, cast: "decimal(9,3)", description: Drift.}
      samples:
        type: L
        description: Samples.
        items: {type: N, cast: bigint, description: A sample.}
partitioning:
  column: sensor_bucket
  expression: "substring(sensor_id, -1, 1)"
"""


def _sensors(tmp_path: Path, text: str = SENSORS_CONTRACT) -> dict[str, str]:
    folder = tmp_path / "contracts"
    folder.mkdir()
    (folder / "sensors.yml").write_text(text, encoding="utf-8")
    return {str(generated.path): generated.text for generated in scaffold_files(load_contracts(folder), "sensors")}


def test_a_number_key_and_a_map_field_at_any_depth_are_typed_and_the_merge_matches_the_key_text(tmp_path: Path) -> None:
    """Issue 45 C2, C3: staging kept number keys and map fields' casts as raw text."""
    files = _sensors(tmp_path)
    model = files["dbt_project/models/staging/stg_dynamodb__sensors.sql"]
    assert "{{ typed_by_contract('sensors', 'sensor_id') }} as sensor_id,\n        sensor_id as sensor_id_text," in model
    assert "unique_key=['sensor_id_text', 'reading_at']" in model
    assert "on cleaned.sensor_id_text = existing.sensor_id_text and cleaned.reading_at = existing.reading_at" in model
    assert ("{{ typed_by_contract('sensors', 'probe.calibration.drift', 'latest.probe.calibration.drift') }} "
            "as probe__calibration__drift,\n        latest.probe.calibration.drift as probe__calibration__drift_text,"
            in model)
    assert "samples" not in model.split("cleaned as (")[1]  # a list element's cast: the unnesting model's
    assert "        _extra_attributes,\n" in model
    models = {model["name"]: model for model in yaml.safe_load(
        files["dbt_project/models/staging/_dynamodb__sensors__models.yml"])["models"]}
    current = models["stg_dynamodb__sensors"]
    assert current["data_tests"][0]["unique_combination"]["arguments"] == {"combination": ["sensor_id_text", "reading_at"]}
    assert current["data_tests"][1]["holds_latest_raw_change"]["arguments"] == {
        "raw_table": "sensors_changes", "key_columns": ["sensor_id", "reading_at"],
        "staged_key_columns": ["sensor_id_text", "reading_at"]}
    columns = {column["name"]: column for column in current["columns"]}
    assert [next(iter(test)) for test in columns["sensor_id"]["data_tests"]] == ["fits_contract_cast"]
    assert [next(iter(test)) for test in columns["sensor_id_text"]["data_tests"]] == ["not_null"]
    assert [next(iter(test)) for test in columns["probe__calibration__drift"]["data_tests"]] == ["fits_contract_cast"]
    assert "sensor_id_invalid, probe__calibration__drift_invalid" in columns["quality_issues"]["description"]


def test_a_map_field_cast_whose_column_another_column_has_is_refused_by_name(tmp_path: Path) -> None:
    clashing = SENSORS_CONTRACT.replace("  readingAt: {type: S, description: When.}\n",
                                        "  readingAt: {type: S, description: When.}\n"
                                        "  other: {type: S, column: probe__calibration__drift, description: X.}\n")
    with pytest.raises(OperatorError, match=r"\['probe__calibration__drift'\] would take the name of another column"):
        _sensors(tmp_path, clashing)


@pytest.fixture
def repository_copy(tmp_path: Path) -> Path:
    """The repository's dbt project, the samples' folders included."""
    return copy_project(tmp_path / "project")


def test_the_app_sample_is_scaffolded_again_in_its_samples_folder(repository_copy: Path) -> None:
    """The README's `lakehouse scaffold --table app` with the sample contracts: the app's
    files are in staging/samples/, where an unchanged contract rewrites none of them, and
    --history adds its marts in marts/samples/."""
    result = scaffold("app", project_dir=repository_copy, contracts=load_contracts(), history=True)

    assert result.written == [
        Path("dbt_project/models/marts/samples/dim_app_invoices_history.sql"),
        Path("dbt_project/models/marts/samples/dim_app_tenants_history.sql"),
        Path("dbt_project/models/marts/samples/dim_app_users_history.sql"),
        Path("dbt_project/models/marts/samples/_dynamodb__app__history.yml"),
    ]
    assert [path for path in (repository_copy / STAGING).glob("*") if path.name != "samples"] == []


def test_contracts_of_ones_own_scaffold_beside_the_samples_they_replace(
    repository_copy: Path, tmp_path: Path
) -> None:
    """The samples' sources describe tables these contracts do not: dbt_project.yml
    disables them (var lakehouse_samples), so they neither stop scaffold nor take its files,
    not even those of a table of one's own named like a sample."""
    folder = tmp_path / "own_contracts"
    folder.mkdir()
    (folder / "widgets.yml").write_text(WIDGETS_CONTRACT, encoding="utf-8")
    (folder / "app.yml").write_text(WIDGETS_CONTRACT.replace("table: widgets\nraw_table: widgets",
                                                             "table: app\nraw_table: app_widgets"), encoding="utf-8")
    samples = _files(repository_copy / SAMPLE_STAGING)

    widgets = scaffold("widgets", project_dir=repository_copy, contracts=load_contracts(folder))
    app = scaffold("app", project_dir=repository_copy, contracts=load_contracts(folder))

    assert Path("dbt_project/models/staging/stg_dynamodb__widgets.sql") in widgets.written
    assert Path("dbt_project/models/staging/stg_dynamodb__app_widgets.sql") in app.written
    assert Path("dbt_project/models/staging/_dynamodb__app__sources.yml") in app.written
    assert _files(repository_copy / SAMPLE_STAGING) == samples


def test_a_raw_table_of_ones_own_named_as_a_samples_is_refused_naming_raw_table(
    repository_copy: Path, tmp_path: Path
) -> None:
    """dbt refuses a second source dynamodb.orders_changes even beside the samples' disabled
    one: such a contract takes another raw_table (test_dbt_samples_var.py builds one)."""
    folder = tmp_path / "own_contracts"
    folder.mkdir()
    (folder / "orders.yml").write_text(WIDGETS_CONTRACT.replace("table: widgets\nraw_table: widgets",
                                                                "table: orders\nraw_table: orders"), encoding="utf-8")

    with pytest.raises(ScaffoldRefused, match=r"samples/_dynamodb__sources\.yml declares source dynamodb\.orders(?s:.*)"
                                              r"give its contract another raw_table"):
        scaffold("orders", project_dir=repository_copy, contracts=load_contracts(folder))
