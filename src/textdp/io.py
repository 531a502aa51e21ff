"""Reading documents and writing outputs atomically.

Readers turn files (plain text, JSONL, gzipped JSONL) or standard input into
``(id, text)`` pairs with clear errors for unreadable or non-UTF-8 input. A
document's id is its input id field when it has one, else its sequence number
in the input (0, 1, 2, ...): never a file name or path, which would describe the
private input. Where each document came from (``path:line``) is available
separately (:func:`read_sourced_documents`) for the data owner's private report.
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
from typing import IO, Any, NamedTuple

from .errors import DocumentError


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")  # a leading byte-order mark is not part of the text
    except UnicodeDecodeError as exc:
        at = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        raise DocumentError(
            f"{source}: not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {at}); "
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


class SourcedDocument(NamedTuple):
    """One input document: its own id (``None`` when the input has no id field), text and origin.

    ``source`` (``path:line`` or ``path``) describes the private input: it goes to
    the private report only, never into a release.
    """

    id: str | None
    text: str
    source: str


def iter_jsonl_text(
    text: str, source: str, text_field: str = "text", id_field: str = "id", *, first_line: int = 1
) -> Iterator[SourcedDocument]:
    """A :class:`SourcedDocument` for every non-empty line of JSONL content (``text`` starts on ``first_line``).

    Lines end at a line feed only (CRLF too): JSON strings may hold a raw U+2028 or U+0085.

    >>> lines = ['{"text": "a"}', '{"id": 7, "text": "b"}']
    >>> [tuple(d) for d in iter_jsonl_text(chr(10).join(lines), "f.jsonl")]
    [(None, 'a', 'f.jsonl:1'), ('7', 'b', 'f.jsonl:2')]
    """
    for lineno, line in enumerate(text.split("\n"), start=first_line):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, huge integers, deep nesting
            why = getattr(exc, "msg", None) or "nested too deeply, or a number too long"
            raise DocumentError(f"{source}:{lineno}: not valid JSON ({why})") from None
        if not isinstance(obj, dict):
            raise DocumentError(f"{source}:{lineno}: each JSONL line must be an object")
        if text_field not in obj:
            raise DocumentError(f"{source}:{lineno}: no field {text_field!r} (choose it with --text-field)")
        value = obj[text_field]
        if not isinstance(value, str):
            raise DocumentError(f"{source}:{lineno}: field {text_field!r} is not a string")
        doc_id = obj.get(id_field)
        yield SourcedDocument(str(doc_id) if doc_id is not None else None, value, f"{source}:{lineno}")


def sequence_ids(docs: list[SourcedDocument], first: int = 0) -> list[str]:
    """Record ids: each document's own id, else its sequence number ``first + k``.

    >>> sequence_ids([SourcedDocument(None, "a", "x"), SourcedDocument("q", "b", "y")], first=5)
    ['5', 'q']
    """
    return [d.id if d.id is not None else str(first + k) for k, d in enumerate(docs)]


def read_documents(
    paths: list[Path], *, text_field: str = "text", id_field: str = "id", input_format: str = "auto"
) -> list[tuple[str, str]]:
    """Read every document of ``paths`` as ``(id, text)`` (``-`` or an empty list means standard input).

    ``input_format`` is ``auto`` (JSONL by file name, else one document per
    file), ``text`` or ``jsonl``. Ids: the id field, else the sequence number.
    """
    docs = read_sourced_documents(paths, text_field=text_field, id_field=id_field, input_format=input_format)
    return list(zip(sequence_ids(docs), (d.text for d in docs)))


def read_sourced_documents(
    paths: list[Path], *, text_field: str = "text", id_field: str = "id", input_format: str = "auto"
) -> list[SourcedDocument]:
    """Like :func:`read_documents`, keeping each document's own id (or ``None``) and its origin."""
    docs: list[SourcedDocument] = []
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
            docs.append(SourcedDocument(None, content, source))
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
