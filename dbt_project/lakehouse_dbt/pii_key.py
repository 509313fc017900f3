"""The secret key of the marts' PII pseudonyms (HMAC-SHA-256), and how it reaches dbt
without ever being written into SQL text, logs or dbt artifacts.

Where the key comes from, first found wins:
1. env `LAKEHOUSE_PII_KEY` (production: CodeBuild injects it from Secrets Manager,
   deploy/stacks/lakehouse.py);
2. `<data>/secrets/pii_key`, generated once per local data directory (mode 0600) by
   `ensure_local_key`, which `lakehouse dbt` and `lakehouse demo` call through run_dbt.

Locally the dbt-duckdb plugin lakehouse_dbt.duckdb_pii_key binds the key's two HMAC
pad blocks to DuckDB variables of every dbt cursor; models refer to the variables by
name (macros/pii/pseudonymize.sql), so compiled SQL holds names, never the key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from lakehouse_dbt.data_dir import PII_KEY_FILE
from lakehouse_dbt.env import DATA_DIR_ENV, PII_KEY_ENV

KEY_ENV = PII_KEY_ENV
# A shorter key could be guessed: the pseudonyms are public to every analyst, so an
# attacker can test candidate keys offline against known (customer, pseudonym) pairs.
MIN_KEY_LENGTH = 32
# SHA-256's block size: HMAC pads (or first hashes) the key to exactly this length.
SHA256_BLOCK_BYTES = 64
INNER_PAD_VARIABLE = "lakehouse_pii_hmac_inner"
OUTER_PAD_VARIABLE = "lakehouse_pii_hmac_outer"


class PiiKeyError(Exception):
    """The PII key is missing or unusable; the message says how to provide one."""


def key_file(data_dir: Path | str) -> Path:
    return Path(data_dir) / PII_KEY_FILE


def ensure_local_key(data_dir: Path | str) -> Path:
    """Creates `<data>/secrets/pii_key` (random, mode 0600) unless it exists; returns it.

    Never overwrites: a new key changes every pseudonym, and incremental marts would
    then mix pseudonyms of two keys (see docs/pii.md, "Fail closed").
    """
    path = key_file(data_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(secrets.token_hex(32))
    return path


def validated_key(text: str, origin: str) -> bytes:
    """The key's bytes as HMAC uses them (UTF-8 of the text, surrounding whitespace
    dropped: a trailing newline in a secret file is not part of the key)."""
    key = text.strip()
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in key):
        # Athena reads the key from a one-line text file (lakehouse_dbt/athena_pii_key.py).
        raise PiiKeyError(f"the PII key from {origin} contains a control character (a line break?)")
    if len(key) < MIN_KEY_LENGTH:
        raise PiiKeyError(
            f"the PII key from {origin} has {len(key)} characters; it needs at least {MIN_KEY_LENGTH} "
            f"(a random one: python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return key.encode("utf-8")


def resolve_key(environ: Mapping[str, str] = os.environ) -> bytes | None:
    """The key from env LAKEHOUSE_PII_KEY, else from the key file of LAKEHOUSE_DATA_DIR;
    None when neither exists. A present but unusable key raises PiiKeyError."""
    if KEY_ENV in environ:
        return validated_key(environ[KEY_ENV], f"env {KEY_ENV}")
    data_dir = environ.get(DATA_DIR_ENV)
    if data_dir:
        path = key_file(data_dir)
        if path.is_file():
            return validated_key(path.read_text(encoding="utf-8"), str(path))
    return None


def key_of_data_dir(data_dir: Path | str | None, environ: Mapping[str, str] = os.environ) -> bytes | None:
    """The key the marts of `data_dir` use: env LAKEHOUSE_PII_KEY, else the data
    directory's key file; None when there is none. Never creates one."""
    return resolve_key({**environ, DATA_DIR_ENV: str(data_dir)} if data_dir is not None else environ)


def pseudonym(key: bytes, label: str, text: str) -> str:
    """The marts' keyed pseudonym of `text` in column `label`: lower-case hex
    HMAC-SHA-256 of `<label>:<text>`, as macros/pii/pseudonymize.sql computes it (its
    label is the column name in hash mode). The quarantine's masked payloads and
    reconcile's samples show the same pseudonyms, so values can be matched to the marts."""
    return hmac.new(key, f"{label}:{text}".encode("utf-8"), hashlib.sha256).hexdigest()


def hmac_pads(key: bytes) -> tuple[bytes, bytes]:
    """The inner and outer pad blocks of HMAC-SHA-256 (RFC 2104) for `key`.

    With them, HMAC(key, m) = SHA256(outer || SHA256(inner || m)): two plain SHA-256
    calls over byte strings, which DuckDB has, where it has no HMAC function.
    """
    if len(key) > SHA256_BLOCK_BYTES:
        key = hashlib.sha256(key).digest()
    block = key.ljust(SHA256_BLOCK_BYTES, b"\x00")
    return bytes(b ^ 0x36 for b in block), bytes(b ^ 0x5C for b in block)
