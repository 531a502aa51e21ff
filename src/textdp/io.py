"""Reading documents and writing outputs atomically.

Readers turn files (plain text, JSONL, gzipped JSONL) or standard input into
``(id, text)`` pairs with clear errors for unreadable or non-UTF-8 input.
Writers never leave a partial file behind: they write to a temporary file in the
target directory and ``os.replace`` it into place only when everything succeeded.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import DocumentError


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(
            f"{source}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "convert it to UTF-8 first"
        ) from None


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except FileNotFoundError:
        raise DocumentError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DocumentError(f"{path}: is a directory, expected a file") from None
    except (OSError, EOFError) as exc:
        raise DocumentError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None


def is_jsonl(path: Path) -> bool:
    """True for ``.jsonl`` / ``.jsonl.gz`` / ``.ndjson`` names."""
    name = path.name.lower()
    return name.endswith((".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz"))


def iter_jsonl_text(
    text: str, source: str, text_field: str = "text", id_field: str = "id"
) -> Iterator[tuple[str, str]]:
    """``(id, text)`` for every non-empty line of JSONL content."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DocumentError(f"{source}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise DocumentError(f"{source}:{lineno}: each JSONL line must be an object")
        if text_field not in obj:
            raise DocumentError(f"{source}:{lineno}: no field {text_field!r} (choose it with --text-field)")
        value = obj[text_field]
        if not isinstance(value, str):
            raise DocumentError(f"{source}:{lineno}: field {text_field!r} is not a string")
        doc_id = obj.get(id_field)
        yield (str(doc_id) if doc_id is not None else f"{source}:{lineno}"), value


def iter_jsonl_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Every JSON object of a JSON-lines file (``.gz`` decompressed), in file order.

    The one JSONL reader for whole records (users, topics, labels beside the text);
    blank lines are skipped; a missing file, non-UTF-8 bytes, invalid JSON or a
    line that is not an object raise :class:`~textdp.errors.DocumentError` naming
    the file and line.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
    >>> _ = p.write_text('{"author": "a", "text": "x"}\\n\\n{"author": "b", "text": "y"}\\n')
    >>> [r["author"] for r in iter_jsonl_records(p)]
    ['a', 'b']
    """
    p = Path(path)
    source = str(p)
    content = _decode(_read_bytes(p), source)
    # split on "\n" only: str.splitlines() also breaks at U+2028, U+0085, ... which JSON strings may hold raw
    for lineno, line in enumerate(content.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DocumentError(f"{source}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise DocumentError(f"{source}:{lineno}: each JSONL line must be an object")
        yield obj


def read_documents(
    paths: list[Path], *, text_field: str = "text", id_field: str = "id", input_format: str = "auto"
) -> list[tuple[str, str]]:
    """Read every document of ``paths`` (``-`` or an empty list means standard input).

    ``input_format`` is ``auto`` (JSONL by file name, else one document per
    file), ``text`` or ``jsonl``.
    """
    docs: list[tuple[str, str]] = []
    sources = paths or [Path("-")]
    for p in sources:
        if str(p) == "-":
            raw = sys.stdin.buffer.read()
            source = "<stdin>"
            jsonl = input_format == "jsonl"
        else:
            raw = _read_bytes(p)
            source = str(p)
            jsonl = input_format == "jsonl" or (input_format == "auto" and is_jsonl(p))
        content = _decode(raw, source)
        if jsonl:
            docs.extend(iter_jsonl_text(content, source, text_field, id_field))
        else:
            docs.append(("stdin" if source == "<stdin>" else p.name, content))
    return docs


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; rename it to ``path`` on success only.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_writer(d / "x.txt") as fh:
    ...     _ = fh.write("ok")
    >>> (d / "x.txt").read_text()
    'ok'
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        if "b" in mode:
            fh = os.fdopen(fd, mode)
        else:
            fh = os.fdopen(fd, mode, encoding="utf-8", newline="\n")
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_writer(path) as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False, allow_nan=False)
        fh.write("\n")


def settings_path(output: str | os.PathLike[str]) -> Path:
    """Where the resolved-settings record of ``output`` goes: ``<output>.settings.json``."""
    p = Path(output)
    return p.with_name(p.name + ".settings.json")
