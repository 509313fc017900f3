"""The real Hudi sample tables in ../shared/hudi-samples, and how tests open and mark them.

Spark with Apache Hudi wrote them from the apache/hudi-rs test data, one table folder per
zip. Table version 6 (`*_v6_*`) keeps a completed commit as a JSON file
`.hoodie/<instant>.commit`, whose `extraMetadata` is where HudiSink records its batch
marker; version 8 moved commits to `.hoodie/timeline/` in Avro.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

from streaming.io.formats.hudi.options import BATCH_MARKER_KEY

# shared/ sits beside the checkout (../shared/design/DESIGN.md, "Real Spark-written Hudi tables").
SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "hudi-samples"


def sample_table(name: str, into: Path) -> Path:
    """Unzip one sample; each zip holds one table folder."""
    with zipfile.ZipFile(SAMPLES / f"{name}.zip") as archive:
        archive.extractall(into)
    (table,) = [path for path in into.iterdir() if path.is_dir()]
    return table


def set_marker(table: Path, instant_file: str, marker: str | None) -> None:
    """Record a batch marker in a real commit, the way Hudi stores extraMetadata."""
    path = table / ".hoodie" / instant_file
    metadata = json.loads(path.read_text())
    extra = dict(metadata.get("extraMetadata") or {})
    if marker is None:
        extra.pop(BATCH_MARKER_KEY, None)
    else:
        extra[BATCH_MARKER_KEY] = marker
    metadata["extraMetadata"] = extra
    path.write_text(json.dumps(metadata))
