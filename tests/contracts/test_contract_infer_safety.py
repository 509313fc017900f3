"""`lakehouse contract infer` as a hostile operator and a new user meet it (issue 45,
items B1-B3, B9, B10, C4, C5, C7): no path escapes through `--table`, no file is lost to
`--out`/`--report`, no PII-flagged value is written in clear, a large sample costs no
more memory than its items, every image of an item is typed, and the review notes say
what was seen, once. Public data where it exists: the DynamoDB developer guide's sample
tables (tests/fixtures/inference/README.md)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from cli_processes import fresh_python
from lakehouse_dbt.pii_key import KEY_ENV, pseudonym
from streaming.cli import main
from streaming.contracts.inference.contract import infer_contract
from streaming.contracts.inference.render import render_contract, report, summary_lines
from streaming.contracts.inference.sample import ItemSample
from streaming.contracts.loader import load_contract_file
from streaming.io.item_samples import sample_file
from streaming.operations import contract_infer

PII_KEY = "k" * 40


def record(table: str, image: dict, keys: tuple[str, ...] = ("pk", "sk"), old: dict | None = None) -> str:
    """A Kinesis Data Streams record of `table` (INSERT, or MODIFY with `old`)."""
    change = {"Keys": {name: image[name] for name in keys}, "NewImage": image}
    if old is not None:
        change["OldImage"] = old
    return json.dumps({"tableName": table, "eventName": "MODIFY" if old else "INSERT", "dynamodb": change})


def records_file(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def user_items(table: str, count: int = 4) -> list[str]:
    return [record(table, {"pk": {"S": f"USER#{n}"}, "sk": {"S": "PROFILE"}, "plan": {"S": "free"}})
            for n in range(count)]


def infer(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(["contract", "infer", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------- B1: --table never reaches a path


def test_a_table_name_holding_a_path_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch):
    # The check file sat at <tmp>/<random>/<table>.yml: `../../x` put it two folders up.
    temporary = tmp_path / "a" / "b"
    temporary.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    victim = tmp_path / "a" / "x.yml"
    victim.write_text("table: precious\n")
    sample = records_file(tmp_path / "records.jsonl", user_items("../../x"))
    code, _, err = infer(["--table", "../../x", "--sample", str(sample)], capsys)
    assert victim.read_text() == "table: precious\n"
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["a", "b", "records.jsonl", "x.yml"]
    assert code == 2 and "--table '../../x' is not a DynamoDB table name" in err


def test_a_table_name_of_255_characters_is_inferred(tmp_path, capsys):
    # DynamoDB allows 255 characters; `<255 characters>.yml` is no file name Linux allows.
    table = "T" * 255
    sample = records_file(tmp_path / "records.jsonl", user_items(table))
    code, out, err = infer(["--table", table, "--sample", str(sample)], capsys)
    assert (code, err) == (0, "")
    assert f"table: {table}" in out.splitlines()


# --------------------------------------------------------------------------- B3 and B10: the files given


def test_the_report_never_overwrites_a_file_without_force(tmp_path, capsys):
    sample = records_file(tmp_path / "records.jsonl", user_items("users"))
    report_file = tmp_path / "users.inference.json"
    report_file.write_text('{"reviewed": true}\n')
    code, _, err = infer(["--table", "users", "--sample", str(sample), "--report", str(report_file)], capsys)
    assert code == 2 and f"--report {report_file} exists; infer never overwrites a file unless --force" in err
    assert report_file.read_text() == '{"reviewed": true}\n'
    assert infer(["--table", "users", "--sample", str(sample), "--report", str(report_file), "--force"], capsys)[0] == 0
    assert json.loads(report_file.read_text())["table"] == "users"


def test_the_report_is_json_and_the_proposal_a_contract_file_so_neither_takes_the_others_place(tmp_path, capsys):
    sample = records_file(tmp_path / "records.jsonl", user_items("users"))
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    contract = contracts / "users.yml"
    # The same name twice, or a report the contract loader would read as a contract.
    for out, report_file in ((contract, contract), (contract, contracts / "users.report.yml")):
        code, _, err = infer(["--table", "users", "--sample", str(sample), "--out", str(out), "--report",
                              str(report_file), "--force"], capsys)
        assert code == 2 and f"--report {report_file}: the file name must end in .json" in err
    code, _, err = infer(["--table", "users", "--sample", str(sample), "--out", str(contracts / "users.txt")], capsys)
    assert code == 2 and "must end in .yml or .yaml (the contract loader reads only these)" in err
    assert list(contracts.iterdir()) == []


@pytest.mark.parametrize("spelling", ["same", "relative", "symlink"])
def test_a_report_onto_the_sample_is_refused_even_with_force(spelling, tmp_path, capsys, monkeypatch):
    sample = records_file(tmp_path / "records.json", user_items("users"))
    before = sample.read_bytes()
    monkeypatch.chdir(tmp_path)
    report_file = {"same": sample, "relative": Path("sub/../records.json"), "symlink": tmp_path / "link.json"}[spelling]
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.json").symlink_to(sample)
    code, _, err = infer(["--table", "users", "--sample", str(sample), "--report", str(report_file), "--force"], capsys)
    assert code == 2 and "are the same file; give each its own" in err
    assert sample.read_bytes() == before


def test_errors_name_the_files_given_never_a_temporary_one(tmp_path, capsys):
    sample = records_file(tmp_path / "records.jsonl", user_items("users"))
    code, _, err = infer(["--table", "users", "--sample", str(sample), "--key", "pk,pk"], capsys)
    assert code == 2 and err.startswith("lakehouse contract: --key 'pk,pk': give the partition key")
    folder = tmp_path / "reports.json"
    folder.mkdir()
    code, _, err = infer(["--table", "users", "--sample", str(sample), "--report", str(folder), "--force"], capsys)
    assert (code, err) == (2, f"lakehouse contract: --report {folder} is a folder; give a file name\n")
    assert list(folder.iterdir()) == []
    assert ".tmp" not in err and tempfile.gettempdir() + "/tmp" not in err


def test_a_failed_write_names_the_file_given_not_its_temporary_neighbour(tmp_path, capsys, monkeypatch):
    def full_disk(path, text):
        temporary = Path(path).parent / f".{Path(path).name}.x1y2.tmp"
        raise OSError(28, "No space left on device", str(temporary))

    monkeypatch.setattr(contract_infer, "write_text_atomically", full_disk)
    sample = records_file(tmp_path / "records.jsonl", user_items("users"))
    out = tmp_path / "users.yml"
    code, _, err = infer(["--table", "users", "--sample", str(sample), "--out", str(out)], capsys)
    assert (code, err) == (2, f"lakehouse contract: {out}: cannot write it: No space left on device\n")


def test_an_out_folder_that_does_not_exist_is_refused_not_created(tmp_path, capsys):
    sample = records_file(tmp_path / "records.jsonl", user_items("users"))
    out = tmp_path / "missing" / "dir" / "users.yml"
    code, _, err = infer(["--table", "users", "--sample", str(sample), "--out", str(out)], capsys)
    assert code == 2 and f"folder {out.parent} does not exist; create it first" in err
    assert not (tmp_path / "missing").exists()


# --------------------------------------------------------------------------- B2: no PII in clear


def sample_of_keyed(items: list[dict]) -> ItemSample:
    sample = ItemSample()
    for image in items:
        sample.add(image, {"pk": image["pk"], "sk": image["sk"]})
    return sample


def email_keyed_records(table: str) -> list[str]:
    """Items keyed by e-mail address (so the key is proposed PII), one of a kind too rare
    for an entity, whose example key the proposal shows."""
    lines = [record(table, {"pk": {"S": f"member{n}@example.com"}, "sk": {"S": f"{kind}#{n}"}})
             for kind in ("ORDER", "INVOICE") for n in range(3)]
    lines.append(record(table, {"pk": {"S": "rare.person@example.com"}, "sk": {"S": "settings"}}))
    return lines


@pytest.mark.parametrize("pii_key", [None, PII_KEY])
def test_an_example_key_flagged_pii_is_never_written_or_printed_in_clear(pii_key, tmp_path, capsys, monkeypatch):
    if pii_key is None:
        monkeypatch.delenv(KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(KEY_ENV, pii_key)
    sample = records_file(tmp_path / "records.jsonl", email_keyed_records("members"))
    out, report_file = tmp_path / "members.yml", tmp_path / "members.inference.json"
    argv = ["--table", "members", "--sample", str(sample), "--data-dir", str(tmp_path / "data")]
    written = infer([*argv, "--out", str(out), "--report", str(report_file)], capsys)
    printed = infer(argv, capsys)
    assert written[0] == printed[0] == 0
    contract = {c.raw_table: c for c in load_contract_file(out)}["members_unrouted"]
    assert contract.attribute("pk").pii
    shown = "***" if pii_key is None else "pii:" + pseudonym(pii_key.encode(), "pk", "rare.person@example.com")
    for text in (out.read_text(), report_file.read_text(), written[1], printed[1]):
        assert "@example.com" not in text
    assert f"e.g. pk={shown}, sk=settings" in out.read_text()
    assert json.loads(report_file.read_text())["unrouted_kinds"][0]["example_key"] == f"pk={shown}, sk=settings"


def test_an_example_key_holding_an_email_is_hidden_even_when_its_key_is_not_flagged():
    # Most sort keys are ORDER#n, so sk is not proposed PII; the one example is an address.
    items = ([{"pk": {"S": f"USER#{n}"}, "sk": {"S": f"ORDER#{n}"}} for n in range(6)]
             + [{"pk": {"S": f"USER#{n}"}, "sk": {"S": f"INVOICE#{n}"}} for n in range(6)]
             + [{"pk": {"S": "USER#0"}, "sk": {"S": "CONTACT#rare.person@example.com"}}])
    proposal = infer_contract("things", sample_of_keyed(items))
    assert not next(a for a in proposal.shared if a.name == "sk").pii
    assert [kind.example_key for kind in proposal.unrouted] == ["pk=USER#0, sk=***"]


def test_an_example_key_not_flagged_pii_is_shown_as_it_is():
    items = ([{"pk": {"S": "T#1"}, "sk": {"S": f"{kind}#{n}"}} for kind in ("A", "B") for n in range(3)]
             + [{"pk": {"S": "T#1"}, "sk": {"S": "settings"}}])
    assert [kind.example_key for kind in infer_contract("things", sample_of_keyed(items)).unrouted] == [
        "pk=T#1, sk=settings"]


# --------------------------------------------------------------------------- B9: memory


def test_a_large_sample_file_is_read_in_the_memory_of_its_sampled_items(tmp_path):
    # 48 MB of records; 100 items are sampled. Reading the whole file to tell whether it is
    # a NoSQL Workbench model took the file's size and more.
    path = tmp_path / "large.jsonl"
    filler = (record("big", {"pk": {"S": "FILLER#0"}, "sk": {"S": "x"}, "text": {"S": "y" * 4000}}) + "\n").encode()
    with open(path, "wb") as stream:
        stream.write("".join(line + "\n" for line in user_items("big", 101)).encode())
        stream.write(filler * (48_000_000 // len(filler)))
    assert path.stat().st_size > 47_000_000
    probe = (
        "import tracemalloc; from streaming.io.item_samples import sample_file; tracemalloc.start(); "
        f"sample = sample_file({str(path)!r}, 'big', 100); "
        "print(len(sample.items), sample.stopped_early, tracemalloc.get_traced_memory()[1])"
    )
    completed = fresh_python(probe)
    assert completed.returncode == 0, completed.stderr
    items, stopped, peak = completed.stdout.split()
    assert (items, stopped) == ("100", "True")
    # The landing reader's buffers: 10.5 MB measured for files of 12, 48 and 96 MB alike.
    assert int(peak) < 16_000_000


def test_a_workbench_model_is_still_told_from_records_by_its_first_bytes(tmp_path):
    model = Path(__file__).parents[1] / "fixtures" / "inference" / "AnOnlineShop_facets.json"
    assert sample_file(model, "OnlineShop", 100).declared_key == ("PK", "SK")
    # An item whose first attribute is named like a model's member is an item.
    item = tmp_path / "items.jsonl"
    item.write_text(json.dumps({"ModelName": {"S": "m1"}, "pk": {"S": "a"}}) + "\n")
    sample = sample_file(item, "things", 100)
    assert sample.declared_key is None and list(sample.items.values()) == [{"ModelName": {"S": "m1"},
                                                                           "pk": {"S": "a"}}]


# --------------------------------------------------------------------------- C5: every image is typed


def test_an_attribute_an_item_has_since_lost_is_typed_from_its_old_image(tmp_path):
    users = [{"pk": {"S": f"USER#{n}"}, "sk": {"S": "PROFILE"}, "plan": {"S": "free"}} for n in range(3)]
    lines = [record("users", {**user, "legacyScore": {"N": "7.25"}}) for user in users]
    # Each user then loses legacyScore: its NewImage lacks it, its OldImage holds it.
    lines += [record("users", user, old={**user, "legacyScore": {"N": "7.25"}}) for user in users]
    sample = sample_file(records_file(tmp_path / "records.jsonl", lines), "users", 100)
    attributes = {a.name: a for a in infer_contract("users", sample).shared}
    assert (attributes["legacyScore"].type, attributes["legacyScore"].cast) == ("N", "decimal(18,2)")
    assert (attributes["legacyScore"].seen, attributes["legacyScore"].of) == (3, 6)
    assert len(sample.items) == 3 and sample.earlier_images == 3


def test_earlier_images_are_bounded_by_max_items_and_the_output_says_how_many_were_left_out():
    sample = ItemSample(max_items=2)
    for version in range(5):
        sample.add({"pk": {"S": "A#1"}, "v": {"N": str(version)}}, {"pk": {"S": "A#1"}})
    assert (len(sample.items), sample.earlier_images, sample.earlier_left_out) == (1, 2, 2)
    proposal = infer_contract("things", sample)
    assert "1 items and 2 earlier image(s) of them (2 more earlier image(s) past --max-items not typed)" in (
        render_contract(proposal))
    assert report(proposal)["sample"]["earlier_images_left_out"] == 2


# --------------------------------------------------------------------------- C4: PII detectors on public data


GUIDE = Path(__file__).parents[1] / "fixtures" / "inference" / "dynamodb_guide"


def guide_items(table: str) -> list[dict]:
    """The items of one of the developer guide's BatchWriteItem files."""
    return [request["PutRequest"]["Item"] for request in json.loads((GUIDE / f"{table}.json").read_text())[table]]


def sample_of(items: list[dict]) -> ItemSample:
    sample = ItemSample()
    for image in items:
        sample.add(image)
    return sample


def test_the_developer_guides_sample_tables_get_no_pii_proposal_and_no_name_review():
    """ProductCatalog's ISBNs (`111-1111111111`), Forum's names (`Amazon DynamoDB`) and
    Thread's `ForumName` name no person and hold no personal data."""
    keys = {"ProductCatalog": ["Id"], "Forum": ["Name"], "Thread": ["ForumName", "Subject"],
            "Reply": ["Id", "ReplyDateTime"]}
    for table, key in keys.items():
        proposal = infer_contract(table, sample_of(guide_items(table)), key=key)
        assert [a.name for _, a in proposal.attributes_with_owner() if a.pii] == [], table
        assert [point for point in proposal.undecided if "name" in point] == [], table


@pytest.mark.parametrize("code", ["978-3-16-148410-0", "0-596-52068-9", "978 0 596 52068 7", "111-1111111111",
                                  "0 12345 67890 5", "192.168.100.200", "2026-11-01", "1234.5678"])
def test_isbns_product_codes_and_other_numbers_are_not_phone_numbers(code):
    items = [{"pk": {"S": f"P#{n}"}, "code": {"S": code}} for n in range(3)]
    (attribute,) = [a for a in infer_contract("products", sample_of(items)).shared if a.name == "code"]
    assert not any("phone" in note for note in attribute.notes)


@pytest.mark.parametrize("phone", ["+14155552671", "+44 20 7946 0000", "(415) 555-2671", "020 7946 0000",
                                   "415-555-2671", "+1-415-555-2671", "+49 30 901820"])
def test_phone_numbers_in_e164_and_national_formats_are_still_proposed_pii(phone):
    items = [{"pk": {"S": f"P#{n}"}, "reach": {"S": phone}} for n in range(3)]
    (attribute,) = [a for a in infer_contract("people", sample_of(items)).shared if a.name == "reach"]
    assert attribute.pii and "most values look like phone numbers" in attribute.notes[-1]


def test_names_of_things_are_not_reviewed_as_peoples_names_and_names_of_people_still_are():
    items = [{"pk": {"S": f"V#{n}"}, "vendorName": {"S": "Acme Corp"}, "forumName": {"S": "Amazon S3"},
              "name": {"S": ["Ana Lima", "Mary-Jane O'Neil", "J. Smith"][n]},
              "holderName": {"S": "x"}, "contactEmail": {"S": f"c{n}@example.org"}} for n in range(3)]
    proposal = infer_contract("vendors", sample_of(items))
    assert {a.name for a in proposal.shared if a.pii} == {"holderName", "contactEmail"}
    assert [point for point in proposal.undecided if "name" in point] == [
        "attributes.name: named like a name, and most values are written like people's names: PII when it names "
        "a person, not when a product or company"]


# --------------------------------------------------------------------------- B10: what is typed gets its REVIEW


def test_malformed_descriptors_are_typed_with_a_review_and_no_cast():
    items = [{"pk": {"S": f"A#{n}"}, "count": {"N": 5}, "flag": {"BOOL": "yes"}, "tags": {"SS": []}}
             for n in range(2)]
    proposal = infer_contract("things", sample_of(items))
    attributes = {a.name: a for a in proposal.shared}
    for name, rule in (("count", "a number written as a JSON string"), ("flag", "true or false"),
                       ("tags", "a non-empty list of strings")):
        assert attributes[name].cast is None
        assert attributes[name].undecided == [
            f"2 of 2 values are not DynamoDB JSON: type {attributes[name].type} holds {rule}; the stream may read "
            "such a value as text or quarantine its item: check the source (no cast proposed)"]
    assert render_contract(proposal).count("# REVIEW: 2 of 2 values are not DynamoDB JSON") == 3


def test_a_timestamp_mixing_zoned_and_zoneless_values_keeps_its_cast_with_a_review():
    items = [{"pk": {"S": f"A#{n}"}, "at": {"S": "2026-11-01T10:00:00" if n % 2 else "2026-11-01T10:00:00+02:00"},
              "utc": {"S": "2026-11-01T10:00:00Z"}} for n in range(4)]
    attributes = {a.name: a for a in infer_contract("things", sample_of(items)).shared}
    assert attributes["at"].cast == attributes["utc"].cast == "timestamp"
    assert attributes["at"].undecided[0].startswith("2 of 4 date-times carry a zone (Z or an offset), the rest none")
    assert attributes["utc"].undecided == []


def test_accented_names_keep_their_letters_in_columns_and_existing_contracts_keep_theirs(tmp_path):
    items = [{"pk": {"S": f"A#{n}"}, "ünïcödé": {"S": "x"}, "naïveCafé": {"M": {"crème": {"S": "y"}}}}
             for n in range(2)]
    path = tmp_path / "things.yml"
    path.write_text(render_contract(infer_contract("things", sample_of(items))))
    (contract,) = load_contract_file(path)
    assert contract.attribute("ünïcödé").column == "unicode"
    assert contract.attribute("naïveCafé").column == "naive_cafe"
    assert [f.column for f in contract.attribute("naïveCafé").fields] == ["creme"]
    # A contract that names no column keeps the loader's derivation, as before.
    path.write_text("table: things\nraw_table: things\ndescription: d\nkey:\n  partition_key: pk\n"
                    "partitioning:\n  column: pk_suffix\n  expression: \"substring(pk, -1, 1)\"\n"
                    "attributes:\n  pk:\n    type: S\n    description: d\n"
                    "  ünïcödé:\n    type: S\n    description: d\n")
    (contract,) = load_contract_file(path)
    assert contract.attribute("ünïcödé").column == "n_c_d"


def test_an_entity_named_from_an_accented_value_keeps_its_letters():
    items = [{"pk": {"S": f"A#{n}"}, "type": {"S": ["Bücher", "Zeitschrift"][n % 2]}} for n in range(4)]
    assert sorted(e.name for e in infer_contract("shop", sample_of(items)).entities) == ["buchers", "zeitschrifts"]


# --------------------------------------------------------------------------- C7: notes said once, and right


def test_a_list_left_out_for_its_elements_is_reviewed_once():
    items = [{"pk": {"S": f"A#{n}"}, "mixed": {"L": [{"N": "1"}, {"S": "x"}]}} for n in range(2)]
    proposal = infer_contract("things", sample_of(items))
    assert [point for point in proposal.undecided if "mixed" in point] == [
        "attributes.mixed: list elements: seen as N (2 elements) and S (2 elements): one column cannot hold both, "
        "so it stays in _extra_attributes (declare one type by hand if the other is an error: its items are then "
        "quarantined as type_mismatch)"]
    assert sum("mixed" in line for line in summary_lines(proposal)) == 1


def test_a_list_holding_a_null_says_how_many_elements_it_typed():
    items = [{"pk": {"S": "A#1"}, "ages": {"L": [{"N": "35"}, {"NULL": True}]}}]
    proposal = infer_contract("things", sample_of(items))
    (ages,) = [a for a in proposal.shared if a.name == "ages"]
    assert ages.items is not None
    # No cast inside a list (staging keeps it as raw has it); the note still counts what it saw.
    (note,) = ages.items.notes
    assert note.startswith("no cast: each element seen is an integer (1 element, 1 NULL aside) (bigint would fit)")
