"""The GSM8K data a bundle carries, so that the GPU host, often without network, can run the accuracy
gate (issue 41 item 3).

The source is the user's (``bundle --accuracy-data URL_OR_FILE``, else their ``accuracy-data``
setting), never a run folder's: a recorded URL is not fetched. An http(s) URL is fetched when the
bundle is made, on the planning machine that has the network; a file is copied. Either is checked
as GSM8K's test.jsonl and goes into the archive as ``accuracy/gsm8k.jsonl`` (the run folder here is
left as it is); ``resume`` of the unpacked run uses that copy unless ``--accuracy-data`` is given.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tools import json_data

BUNDLED_GSM8K = "accuracy/gsm8k.jsonl"
MAX_DATA_BYTES = 64 << 20  # GSM8K's test set is under a megabyte
FETCH_TIMEOUT_S = 60


class DataError(Exception):
    """The accuracy data cannot be had or is not GSM8K's format; the message says why and the fix."""


@dataclass(frozen=True)
class AccuracyData:
    source: str          # as the user gave it
    data: bytes
    questions: int


def users_source(given: str | None) -> str | None:
    """The option, else the user's own setting (environment, config file); never the run folder's."""
    if given:
        return given
    from agent.settings.layers import load_settings

    return load_settings({}).accuracy_data


def fetch_accuracy_data(source: str) -> AccuracyData:
    """``source`` read (an http(s) URL fetched now, else a file here) and checked as GSM8K test.jsonl."""
    scheme = source.split("://", 1)[0].lower() if "://" in source else ""
    if scheme in ("http", "https"):
        data = _fetch(source)
    elif scheme:
        raise DataError(f"--accuracy-data {source}: only an http(s) URL or a file is read; download it and pass the file")
    else:
        data = _read(Path(source).expanduser())
    return AccuracyData(source, data, _questions(source, data))


def _fetch(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:  # noqa: S310  http(s) only, above
            data = answer.read(MAX_DATA_BYTES + 1)
    except urllib.error.HTTPError as err:
        raise DataError(f"--accuracy-data {url}: the server answered {err.code} {err.reason}; check the URL") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        why = getattr(err, "reason", None) or err
        raise DataError(f"--accuracy-data {url}: cannot fetch it ({why}); check the URL and the network, or pass "
                        "a downloaded file") from None
    return _capped(url, data)


def _read(path: Path) -> bytes:
    try:
        with open(json_data.open_regular(path), "rb") as f:
            data = f.read(MAX_DATA_BYTES + 1)
    except OSError as err:
        raise DataError(f"--accuracy-data {path}: {err.strerror or err}; pass GSM8K's test.jsonl") from None
    return _capped(str(path), data)


def _capped(source: str, data: bytes) -> bytes:
    if len(data) > MAX_DATA_BYTES:
        raise DataError(f"--accuracy-data {source} is over {MAX_DATA_BYTES >> 20} MiB: not GSM8K's test.jsonl")
    return data


def _questions(source: str, data: bytes) -> int:
    """How many questions ``data`` holds; DataError unless every line is a GSM8K record."""
    count = 0
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        lines = None
    for number, line in enumerate(lines or [], 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("question", "answer")):
            raise DataError(f"--accuracy-data {source}: line {number} is no GSM8K record (a JSON object with "
                            "'question' and 'answer'); pass GSM8K's test.jsonl")
        count += 1
    if not count:
        raise DataError(f"--accuracy-data {source} holds no GSM8K question (not UTF-8 JSON lines); pass GSM8K's "
                        "test.jsonl")
    return count


def bundled_data(run: Path, overrides: dict) -> dict:
    """The resume's overrides with the bundle's GSM8K copy as ``accuracy_data``, where the run holds one and
    the user gives none now."""
    copy = run / BUNDLED_GSM8K
    if overrides.get("accuracy_data") or not copy.is_file() or copy.is_symlink():
        return overrides
    return {**overrides, "accuracy_data": str(copy.resolve())}
