"""Reading documents and writing outputs atomically.

Readers turn files (plain text, JSONL, gzipped JSONL, Parquet) or standard input into
``(id, text)`` pairs with clear errors for unreadable or non-UTF-8 input. A
document's id is its input id field when it has one, else its sequence number
in the input (0, 1, 2, ...): never a file name or path, which would describe the
private input. Where each document came from (``path:line``) is available
separately (:func:`read_sourced_documents`) for the data owner's private report.
Writers never leave a partial file behind: they write to a temporary file in the
target directory and move it into place only when everything succeeded; they
never replace an existing file unless asked to (``overwrite=True``), and
:func:`check_output_paths` refuses outputs that are inputs or existing files
before any work is done (the CLI's ``--force`` lifts the second refusal).

File modes: release files (``private=False``) get the usual mode the umask
gives new files (``0o644`` under umask 022), or keep the mode of the file they
replace. Files that describe the private input (``private=True``, the default:
private reports, a partitioned run's work directory, caches) are created
owner-only (``0o600``), also when they replace a file.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import stat
import sys
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Literal, NamedTuple, overload

from .errors import DocumentError, OutputExistsError, ParameterError

#: How inputs are read: ``auto`` (JSONL or Parquet by file name, else plain text), ``text`` or ``jsonl``.
INPUT_FORMATS = ("auto", "text", "jsonl")

#: File names read as Parquet by ``auto`` (one document per row, its text in the ``text_field`` column).
PARQUET_SUFFIXES = (".parquet", ".pq")

#: The output names that mean standard output (``-o -``, ``-o /dev/stdout``): never a path to replace.
STDOUT_NAMES = ("-", "/dev/stdout")

#: Byte-order marks of the encodings that are not UTF-8 but say what they are (the longest first).
_OTHER_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
               (b"\xfe\xff", "UTF-16"))


def _decode(data: bytes, source: str) -> str:
    """``data`` as UTF-8 text, else a one-line error saying what it is (UTF-16, UTF-32, Parquet) and how to fix it.

    >>> _decode("hi".encode("utf-16"), "a.txt")
    Traceback (most recent call last):
    ...
    textdp.errors.DocumentError: a.txt: is UTF-16 (it starts with a UTF-16 byte-order mark), not UTF-8; convert it first, e.g. iconv -f UTF-16 -t UTF-8 a.txt > a.utf8.txt
    """
    try:
        return data.decode("utf-8-sig")  # a leading byte-order mark is not part of the text
    except UnicodeDecodeError as exc:
        for bom, encoding in _OTHER_BOMS:
            if data.startswith(bom):
                out = Path(source).with_suffix(".utf8.txt").name if source != "<stdin>" else "out.txt"
                raise DocumentError(
                    f"{source}: is {encoding} (it starts with a {encoding} byte-order mark), not UTF-8; convert it "
                    f"first, e.g. iconv -f {encoding} -t UTF-8 {source if source != '<stdin>' else 'FILE'} > {out}"
                ) from None
        if _looks_parquet(data):
            raise DocumentError(f"{source}: is a Parquet file; name it .parquet (or .pq) and leave --input-format "
                                "at auto to read one document per row") from None
        at = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        raise DocumentError(
            f"{source}: not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {at}); "
            "convert it to UTF-8 first"
        ) from None


def is_parquet(path: Path) -> bool:
    """True for ``.parquet`` / ``.pq`` names.

    >>> is_parquet(Path("corpus.PARQUET")), is_parquet(Path("corpus.jsonl"))
    (True, False)
    """
    return path.name.lower().endswith(PARQUET_SUFFIXES)


def _looks_parquet(data: bytes) -> bool:
    """Parquet's magic number ``PAR1`` at both ends."""
    return len(data) >= 12 and data[:4] == b"PAR1" and data[-4:] == b"PAR1"


def _parquet_documents(data: bytes, source: str, text_field: str, id_field: str) -> list[SourcedDocument]:
    """One :class:`SourcedDocument` per row of Parquet ``data`` (text: column ``text_field``; id: ``id_field``)."""
    import pyarrow as pa

    return list(iter_parquet_documents(pa.BufferReader(data), source, text_field, id_field))


#: rows a Parquet input is read at a time (:func:`iter_parquet_documents`: memory stays bounded)
PARQUET_BATCH_ROWS = 4096


def iter_parquet_documents(fh: object, source: str, text_field: str = "text", id_field: str = "id"
                           ) -> Iterator[SourcedDocument]:
    """One :class:`SourcedDocument` per row of the Parquet file open as ``fh`` (seekable), a batch of rows at a time.

    ``fh`` is whatever ``pyarrow.parquet.ParquetFile`` reads: a seekable binary file or a pyarrow buffer reader.

    Text: column ``text_field``; id: column ``id_field`` when the file has one. A file that
    is not Parquet, a missing text column, a text that is not a string or an id that is an
    object or a list raise :class:`~textdp.errors.DocumentError` naming the row.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(fh)
        names = pf.schema_arrow.names
        if text_field not in names:
            raise DocumentError(f"{source}: no column {text_field!r} (choose it with --text-field; its columns: "
                                f"{', '.join(names[:20])})")
        batches = pf.iter_batches(batch_size=PARQUET_BATCH_ROWS,
                                  columns=[text_field] + ([id_field] if id_field in names else []))
        k = 0
        for batch in batches:
            texts = batch.column(text_field).to_pylist()
            ids = batch.column(id_field).to_pylist() if id_field in names else [None] * len(texts)
            for i, t in zip(ids, texts):
                if not isinstance(t, str):
                    raise DocumentError(f"{source}: row {k}: column {text_field!r} is not a string")
                if isinstance(i, (dict, list)):
                    raise DocumentError(f"{source}: row {k}: column {id_field!r} is not a string or number; record "
                                        "ids must be (choose the id column with --id-field)")
                yield SourcedDocument(str(i) if i is not None else None, t, f"{source}:row {k}")
                k += 1
    except (pa.ArrowException, OSError) as exc:
        raise DocumentError(f"{source}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None


def iter_jsonl_stream(fh: IO[bytes], source: str, text_field: str = "text", id_field: str = "id"
                      ) -> Iterator[SourcedDocument]:
    """A :class:`SourcedDocument` for every non-empty line of the JSONL byte stream ``fh``, one line at a time.

    The same documents and errors as :func:`iter_jsonl_text` on the whole content (a
    byte-order mark at the start is skipped), in memory bounded by the longest line, so a
    pipe or a gzip stream of any size can be read once.

    >>> import io
    >>> [tuple(d) for d in iter_jsonl_stream(io.BytesIO(b'{"text": "a"}\\n\\n{"id": 2, "text": "b"}'), "p")]
    [(None, 'a', 'p:1'), ('2', 'b', 'p:3')]
    """
    for lineno, raw in enumerate(fh, start=1):
        try:
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            if lineno == 1:
                _decode(raw, source)  # says what the file is (UTF-16, Parquet, ...) when it can
            raise DocumentError(f"{source}:{lineno}: not valid UTF-8 (byte 0x{raw[exc.start]:02x}); convert it to "
                                "UTF-8 first") from None
        yield from iter_jsonl_text(line, source, text_field, id_field, first_line=lineno)


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
        if isinstance(doc_id, (dict, list)):  # its Python repr would become the record id
            kind = "an object" if isinstance(doc_id, dict) else "an array"
            raise DocumentError(f"{source}:{lineno}: field {id_field!r} is {kind}; record ids must be strings or "
                                "numbers (choose the id field with --id-field)")
        rid = str(doc_id) if doc_id is not None else None
        if rid is not None and not _encodable(rid):
            raise DocumentError(f"{source}:{lineno}: field {id_field!r} is not valid Unicode (it holds a lone "
                                "surrogate such as \\udc80); record ids are copied to the output, so fix them")
        yield SourcedDocument(rid, value, f"{source}:{lineno}")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def sequence_ids(docs: Sequence[SourcedDocument], first: int = 0) -> list[str]:
    """Record ids: each document's own id, else its sequence number ``first + k``.

    >>> sequence_ids([SourcedDocument(None, "a", "x"), SourcedDocument("q", "b", "y")], first=5)
    ['5', 'q']
    """
    return [d.id if d.id is not None else str(first + k) for k, d in enumerate(docs)]


def find_duplicate_ids(ids: Callable[[], Iterable[str]]) -> tuple[int, str | None]:
    """How many records repeat an earlier record's id, and the first id that repeats (in input order).

    ``ids()`` returns the record ids in input order; it is called a second time
    only when duplicates are likely, so the ids need not fit in memory (8 bytes
    per id: a 64-bit hash; the second pass makes the answer exact).

    >>> find_duplicate_ids(lambda: ["a", "b", "a", "c", "b", "a"])
    (3, 'a')
    >>> find_duplicate_ids(lambda: ["0", "1"])
    (0, None)
    """
    hashes = array("Q")
    for i in ids():
        hashes.append(int.from_bytes(hashlib.blake2b(i.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                     "little"))
    if not hashes:
        return 0, None
    import numpy as np  # here, not at import: the command line's start-up does without it

    h = np.frombuffer(hashes, dtype=np.uint64)
    values, counts = np.unique(h, return_counts=True)
    suspects = {int(v) for v in values[counts > 1]}
    if not suspects:
        return 0, None
    seen: set[str] = set()
    count, first = 0, None
    for i, k in zip(ids(), hashes):
        if k in suspects:
            if i in seen:
                count += 1
                first = i if first is None else first
            seen.add(i)
    return count, first


def duplicate_ids_message(count: int, first: str) -> str:
    """``"N records repeat an earlier record's id (first: 'x')"``: what the duplicate-id warning and error say."""
    what = "record repeats" if count == 1 else "records repeat"
    return f"{count} {what} an earlier record's id (first: {first!r}); such records cannot be told apart"


def iter_jsonl_records(path: str | os.PathLike[str]) -> Iterator[dict[str, object]]:
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
    """Read every document of ``paths`` as ``(id, text)`` (``-`` or an empty list means standard input).

    ``input_format`` is ``auto`` (JSONL or Parquet by file name, else one
    document per file: an empty file holds none), ``text`` or ``jsonl``. Parquet files hold one document
    per row (the ``text_field`` column). Ids: the id field, else the sequence number.
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
            if input_format == "auto" and is_parquet(p):
                docs.extend(_parquet_documents(raw, source, text_field, id_field))
                continue
        content = _decode(raw, source)
        if jsonl:
            docs.extend(iter_jsonl_text(content, source, text_field, id_field))
        elif content:  # an empty file holds no document (as an empty JSONL file holds none)
            docs.append(SourcedDocument(None, content, source))
    return docs


def is_stdout(path: str | os.PathLike[str] | None) -> bool:
    """True when an output path means standard output (:data:`STDOUT_NAMES`).

    >>> is_stdout("-"), is_stdout(Path("/dev/stdout")), is_stdout("out.jsonl"), is_stdout(None)
    (True, True, False, False)
    """
    return path is not None and str(path) in STDOUT_NAMES


def not_a_regular_file(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it exists and is not a regular file (links followed): ``"a FIFO"``, ...; else ``None``.

    Outputs are only ever regular files: a device, FIFO, socket or directory is never replaced (not even with
    ``--force``), since replacing ``/dev/null`` or a named pipe with a file breaks the system or the reader.

    >>> not_a_regular_file("/dev/null"), not_a_regular_file("/no/such/file")
    ('a character device', None)
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, a dangling link, a name the system refuses
        return None
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"  # pragma: no cover - door files, whiteouts


def refuse_special_output(path: str | os.PathLike[str], label: str) -> None:
    """Refuse an output that exists and is not a regular file, whatever ``--force`` says (one-line error).

    >>> refuse_special_output("/dev/null", "--output")
    Traceback (most recent call last):
    ...
    textdp.errors.OutputExistsError: --output /dev/null is a character device, not a regular file; textdp writes regular files only and never replaces anything else, not even with --force: choose a file name (-o - is standard output)
    """
    kind = not_a_regular_file(path)
    if kind is not None:
        hint = " (-o - is standard output)" if label == "--output" else ""
        raise OutputExistsError(f"{label} {path} is {kind}, not a regular file; textdp writes regular files only and "
                                f"never replaces anything else, not even with --force: choose a file name{hint}")


def _umask() -> int:
    """The process umask (read without changing it where the platform allows)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - non-Linux fallback
    os.umask(mask)  # pragma: no cover
    return mask  # pragma: no cover


def _file_mode(target: Path, private: bool) -> int:
    if private:
        return 0o600
    try:
        return stat.S_IMODE(target.stat().st_mode)  # keep the mode of the file being replaced
    except OSError:
        return 0o666 & ~_umask()


@overload
def atomic_writer(
    path: str | os.PathLike[str], mode: Literal["w"] = "w", *, overwrite: bool = True, private: bool = True
) -> contextlib.AbstractContextManager[IO[str]]: ...


@overload
def atomic_writer(
    path: str | os.PathLike[str], mode: Literal["wb"], *, overwrite: bool = True, private: bool = True
) -> contextlib.AbstractContextManager[IO[bytes]]: ...


def atomic_writer(
    path: str | os.PathLike[str], mode: str = "w", *, overwrite: bool = True, private: bool = True
) -> contextlib.AbstractContextManager[IO[str] | IO[bytes]]:
    """Open a temporary file beside ``path``; move it to ``path`` on success only.

    ``overwrite=False`` never replaces an existing ``path`` (not even one created
    while writing): it raises :class:`~textdp.errors.OutputExistsError` and leaves
    both files as they were. ``private`` sets the file mode (see the module notes).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_writer(d / "x.txt") as fh:
    ...     _ = fh.write("ok")
    >>> (d / "x.txt").read_text()
    'ok'
    >>> with atomic_writer(d / "x.txt", overwrite=False) as fh:  # doctest: +ELLIPSIS
    ...     _ = fh.write("new")
    Traceback (most recent call last):
    ...
    textdp.errors.OutputExistsError: .../x.txt exists; ...
    """
    return _atomic_writer(Path(path), mode, overwrite=overwrite, private=private)


@contextlib.contextmanager
def _atomic_writer(target: Path, mode: str, *, overwrite: bool, private: bool) -> Iterator[IO[str] | IO[bytes]]:
    """:func:`atomic_writer`'s work (one writer for both modes)."""
    refuse_special_output(target, "the output")  # before any work; checked again just before the move
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file where a folder of the path should be
        raise ParameterError(_not_a_folder(target, "the output")) from None
    # The hidden file's name is chosen before the ``try`` and the file is created inside it, so an interrupt that
    # lands at any point after the file exists is inside the cleanup's reach. Holding SIGINT/SIGTERM with a thread's
    # signal mask is not enough: a process-directed signal then goes to another thread that does not hold it, and
    # Python raises it in the main thread at its next check (failed in CI, tests/test_atomic_signals.py).
    tmp = _temporary_name(target)
    try:
        try:
            fd = _create_temporary(tmp)
        except FileExistsError:  # another writer's name (chance 2**-64): never ours to remove
            tmp = ""
            raise
        except OSError as exc:  # name the output, not the hidden temporary file beside it
            raise type(exc)(exc.errno, f"cannot write here ({exc.strerror})", str(target)) from None
        if "b" in mode:
            fh = os.fdopen(fd, mode)
        else:
            fh = os.fdopen(fd, mode, encoding="utf-8", newline="\n")
        with fh:
            yield fh
            fh.flush()
            os.fchmod(fh.fileno(), _file_mode(target, private))
            os.fsync(fh.fileno())
        refuse_special_output(target, "the output")  # one made while writing is not replaced either
        try:
            if overwrite:
                os.replace(tmp, target)
            else:
                _move_no_replace(tmp, target)
        except OutputExistsError:
            raise
        except OSError as exc:
            raise type(exc)(exc.errno, f"cannot write here ({exc.strerror})", str(target)) from None
    except BaseException:
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise


def _temporary_name(target: Path) -> str:
    """A fresh hidden name beside ``target``: ``.NAME.<16 random hex digits>.tmp`` (OS entropy, never a seed)."""
    return str(target.parent / f".{target.name}.{os.urandom(8).hex()}.tmp")


def _create_temporary(name: str) -> int:
    """Create ``name`` exclusively (mode 0600, never through a symbolic link) and return its descriptor."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(name, flags | getattr(os, "O_BINARY", 0), 0o600)


def _move_no_replace(tmp: str, target: Path) -> None:
    try:
        os.link(tmp, target)  # atomic: fails if ``target`` exists
    except FileExistsError:
        raise OutputExistsError(f"{target} exists; choose another path, or pass --force to replace it") from None
    except OSError:  # pragma: no cover - file systems without hard links
        if target.exists() or target.is_symlink():
            raise OutputExistsError(f"{target} exists; choose another path, or pass --force to replace it") from None
        os.replace(tmp, target)
        return
    os.unlink(tmp)


def _file_in_the_way(path: Path) -> Path | None:
    """The nearest existing folder of ``path`` that is not a folder (a file), or ``None``."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def _not_a_folder(path: Path, label: str) -> str:
    blocker = _file_in_the_way(path)
    where = f"{blocker} is a file, not a folder" if blocker is not None else "a folder of it cannot be created"
    return f"{label} {path}: {where}; choose a path in a folder (or a new folder's name)"


def check_writable_folder(path: str | os.PathLike[str], label: str) -> None:
    """Refuse an output folder that cannot be created or written, before any work and any private state.

    The probe creates and removes an empty temporary folder in ``path`` (or, when it
    does not exist yet, in its nearest existing parent), so a run that would fail to
    write its output is refused before it starts (nothing is left behind, in the
    output or in the cache).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "f").write_text("a file")
    6
    >>> check_writable_folder(d / "f" / "out", "--output")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --output .../f/out: .../f is a file, not a folder; ...
    >>> check_writable_folder(d / "new" / "out", "--output")  # fine: it can be created
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ParameterError(f"{label} {p} is {not_a_regular_file(p) or 'a file'}; give a folder")
    if _file_in_the_way(p) is not None:
        raise ParameterError(_not_a_folder(p, label))
    base = p if p.is_dir() else next((q for q in p.parents if q.is_dir()), Path("."))
    try:
        os.rmdir(tempfile.mkdtemp(dir=base, prefix=".textdp-probe-"))
    except OSError as exc:
        raise ParameterError(f"{label} {p}: cannot write in {base} ({exc.strerror or exc}); choose a folder you can "
                             "write to") from None


def write_json(path: str | os.PathLike[str], obj: object, *, overwrite: bool = True, private: bool = True) -> None:
    """Write ``obj`` as indented JSON, atomically (``overwrite``, ``private``: as for :func:`atomic_writer`)."""
    with atomic_writer(path, overwrite=overwrite, private=private) as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False, allow_nan=False)
        fh.write("\n")


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """True when ``a`` and ``b`` name the same file: same resolved path, or same device and inode.

    Catches symbolic links, hard links, ``..`` and relative paths.

    >>> same_file("x/../y.txt", "y.txt")
    True
    """
    pa, pb = Path(a), Path(b)
    if pa.resolve() == pb.resolve():
        return True
    try:
        return os.path.samefile(pa, pb)
    except OSError:
        return False


def _same_bytes(a: Path, b: Path) -> bool:
    """True when the regular files ``a`` and ``b`` hold the same bytes (sizes first, then 1 MiB blocks)."""
    try:
        if not (a.is_file() and b.is_file()) or a.stat().st_size != b.stat().st_size:
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                x, y = fa.read(1 << 20), fb.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


def check_public_file(path: str | os.PathLike[str], option: str, inputs: Sequence[str | os.PathLike[str] | None], *,
                      why: str) -> None:
    """Refuse a file given as PUBLIC text (``--domain-vocab``, ``--clip-public``) that is a private input.

    The same file (links, ``..``, relative paths) or a copy of one (the same bytes) is refused in one line
    ending with ``why`` (what the public text is for); :func:`documents_found_in` tells whether it holds an
    input document among other text.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "letter.txt").write_text("private"), (d / "copy.txt").write_text("private")
    (7, 7)
    >>> check_public_file(d / "copy.txt", "--clip-public", [d / "letter.txt"], why="use public text")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --clip-public .../copy.txt has the same bytes as the input file .../letter.txt; use public text
    """
    p = Path(path)
    for q in inputs:
        if q is None or str(q) == "-":
            continue
        if same_file(p, q):
            raise ParameterError(f"{option} {p} is the input file {q}; {why}")
        if _same_bytes(p, Path(q)):
            raise ParameterError(f"{option} {p} has the same bytes as the input file {q}; {why}")


#: An input document shorter than this (after white space is collapsed) counts as found in a public text only
#: when it is one whole public text: a short phrase inside public prose is no sign of a mistake.
FOUND_INSIDE_MIN_CHARS = 32


def documents_found_in(public_texts: Iterable[str], documents: Iterable[str]) -> int:
    """How many of ``documents`` appear in ``public_texts``: as one whole text, or (from
    :data:`FOUND_INSIDE_MIN_CHARS` characters) inside one; white space is collapsed first.

    >>> letter = "Dear Ann, the results of your test came back and we need to talk."
    >>> documents_found_in(["boats sail", "Intro.  " + letter + " Bye."], [letter, "hi", "boats   sail"])
    2
    """
    def flat(text: str) -> str:
        return " ".join(text.split())

    texts = [flat(t) for t in public_texts]
    whole = set(texts)
    joined = " ".join(texts)  # a document of several lines matches a public file's consecutive lines
    found = 0
    for doc in documents:
        d = flat(doc)
        if d and (d in whole or (len(d) >= FOUND_INSIDE_MIN_CHARS and d in joined)):
            found += 1
    return found


def check_output_paths(
    outputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
    *,
    inputs: Sequence[str | os.PathLike[str] | None] = (),
    force: bool = False,
    existing: bool = True,
    new_folders: bool = True,
) -> None:
    """Refuse output files that would replace an input or an existing file, before any work.

    ``outputs`` are ``(option name, path)`` pairs (``None`` paths are skipped),
    ``inputs`` every file the command reads (``-`` is standard input). Two
    outputs on the same file and an output that is a directory are always
    refused, and so is one that exists and is not a regular file (a device, a FIFO, a socket: see
    :func:`refuse_special_output`), and (``new_folders=False``, the command line's choice) so is an ``--output``
    file whose folder does not exist, rather than making it silently (the private files, a report or a ledger,
    may make theirs); an output that is an input is always refused (``force`` never
    lifts that: it is for outputs only); one that (``existing=True``) exists is
    refused unless ``force``.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "in.txt").write_text("private")
    7
    >>> check_output_paths([("--output", d / "in.txt")], inputs=[d / "in.txt"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    textdp.errors.OutputExistsError: --output .../in.txt is the input file .../in.txt; ...
    """
    named = [(label, Path(p)) for label, p in outputs if p is not None and not is_stdout(p)]
    for k, (label, p) in enumerate(named):
        if p.is_dir():
            raise ParameterError(f"{label} {p} is a directory; give a file name")
        refuse_special_output(p, label)  # with or without --force
        if _file_in_the_way(p) is not None:
            raise ParameterError(_not_a_folder(p, label))
        if not new_folders and label.startswith("--output") and not p.parent.is_dir():  # said, never made silently
            raise ParameterError(f"{label} {p}: the folder {p.parent} does not exist; create it first (mkdir -p "
                                 f"{p.parent}) or choose a path in an existing folder")
        for other_label, q in named[:k]:
            if same_file(p, q):
                raise ParameterError(f"{label} {p} and {other_label} {q} are the same file; give two paths")
    sources = [Path(p) for p in inputs if p is not None and str(p) != "-"]
    for label, p in named:
        for q in sources:
            if same_file(p, q):  # with or without --force: --force is for outputs, never for an input
                raise OutputExistsError(
                    f"{label} {p} is the input file {q}; it would be overwritten: choose another path "
                    "(--force never replaces an input)"
                )
        if not force and existing and (p.exists() or p.is_symlink()):
            raise OutputExistsError(f"{label} {p} exists; choose another path, or pass --force to replace it")


def settings_path(output: str | os.PathLike[str]) -> Path:
    """Where the resolved-settings record of ``output`` goes: ``<output>.settings.json``."""
    p = Path(output)
    return p.with_name(p.name + ".settings.json")


def read_public_documents(path: str | os.PathLike[str], *, what: str, input_format: str = "auto",
                          text_field: str = "text", id_field: str = "id") -> tuple[list[SourcedDocument], str]:
    """The documents of a user-named PUBLIC file (``--domain-vocab``, ``--clip-public``) and the SHA-256 of its bytes.

    The file is checked and read once (:func:`textdp._cache.read_public_file`: refused, one line naming the
    component at fault, if another user could change it, unless ``--allow-shared-files``); the documents are
    parsed from those very bytes (gzip, JSONL, Parquet or plain text, as :func:`read_documents`), never from a
    second read. The hash is of the file as read (compressed bytes for ``.gz``), for the public settings.
    """
    from ._cache import read_public_file

    p = Path(path)
    pub = read_public_file(p, what=what)
    raw = pub.data
    source = str(p)
    if p.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise DocumentError(f"{p}: cannot read ({exc})") from None
    if input_format == "auto" and is_parquet(p):
        return _parquet_documents(raw, source, text_field, id_field), pub.sha256
    content = _decode(raw, source)
    if input_format == "jsonl" or (input_format == "auto" and is_jsonl(p)):
        return list(iter_jsonl_text(content, source, text_field, id_field)), pub.sha256
    return [SourcedDocument(None, content, source)], pub.sha256
