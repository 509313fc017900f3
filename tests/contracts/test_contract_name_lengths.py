"""How long a raw table or column name may be (streaming/contracts/names.py): the longest
name derived from it must still fit a file name and a Glue table or column name."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from contract_files import EVENTS, write_contract
from streaming.contracts.loader import load_contract_file, load_contracts
from streaming.contracts.model import ContractError
from streaming.contracts.names import MAX_COLUMN_LENGTH, MAX_RAW_TABLE_LENGTH, NAME_LIMIT
from streaming.operations.scaffold import scaffold


def _longest(raw_table_length: int, column_length: int) -> dict[str, Any]:
    document = copy.deepcopy(EVENTS)
    document["raw_table"] = "r" * raw_table_length
    document["attributes"]["amount"]["column"] = "c" * column_length
    return document


def test_the_longest_names_load_and_scaffold_files_and_relations_within_the_limit(tmp_path: Path) -> None:
    write_contract(tmp_path / "contracts", _longest(MAX_RAW_TABLE_LENGTH, MAX_COLUMN_LENGTH))
    contracts = load_contracts(tmp_path / "contracts")
    project = tmp_path / "project"

    # A longer name died here with OSError (File name too long), and so did this one while
    # the atomic write named its temporary file after the whole target name.
    result = scaffold("events", project_dir=project, contracts=contracts)

    assert all((project / path).is_file() for path in result.written)
    longest_file = max((Path(path).name for path in result.written), key=len)
    assert len(longest_file) == NAME_LIMIT, longest_file
    model_names = [Path(path).stem for path in result.written if Path(path).suffix == ".sql"]
    assert max(len(name) for name in model_names) <= NAME_LIMIT
    text_column = "c" * MAX_COLUMN_LENGTH + "_text"
    assert len(text_column) == NAME_LIMIT
    assert any(text_column in (project / path).read_text(encoding="utf-8") for path in result.written)


@pytest.mark.parametrize(
    ("raw_table_length", "column_length", "field", "limit"),
    [(MAX_RAW_TABLE_LENGTH + 1, 10, "raw_table", MAX_RAW_TABLE_LENGTH),
     (10, MAX_COLUMN_LENGTH + 1, "attributes.amount.column", MAX_COLUMN_LENGTH)],
    ids=["raw_table", "column"],
)
def test_a_name_one_character_longer_is_refused_at_load_with_its_field_and_the_limit(
    tmp_path: Path, raw_table_length: int, column_length: int, field: str, limit: int
) -> None:
    path = write_contract(tmp_path, _longest(raw_table_length, column_length))

    with pytest.raises(ContractError) as error:
        load_contract_file(path)

    message = str(error.value)
    assert message.startswith(f"{path}: line ") and field in message, message
    assert f"is {limit + 1} characters, over the {limit}" in message


def test_dynamodb_table_names_of_255_characters_scaffold_apart_within_the_file_name_limit(tmp_path: Path) -> None:
    # DynamoDB allows them; `_dynamodb__<table>__history.yml` would be 279 characters.
    tables = ["t" * 254 + "a", "t" * 254 + "b"]
    for number, table in enumerate(tables):
        write_contract(tmp_path / "contracts", {**EVENTS, "table": table, "raw_table": f"events_{number}"},
                       name=f"{number}.yml")
    contracts = load_contracts(tmp_path / "contracts")
    project = tmp_path / "project"

    written = [scaffold(table, project_dir=project, contracts=contracts, history=True).written for table in tables]

    yaml_names = [sorted(Path(path).name for path in paths if Path(path).suffix == ".yml") for paths in written]
    assert all(len(names) == 3 and max(len(name) for name in names) <= NAME_LIMIT for names in yaml_names)
    assert not set(yaml_names[0]) & set(yaml_names[1]), "the two tables' files stay apart"
    assert all((project / path).is_file() for paths in written for path in paths)
