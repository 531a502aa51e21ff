"""The single-file steps of a release: one process, one release file (or standard output).

:func:`textdp.release.release` (``textdp obfuscate FILE -o out.jsonl``, every command and Python
caller) runs these steps, shared with the partitioned driver
(:func:`textdp.engines.corpus.obfuscate_corpus`) where they are the same step:

* the output paths are checked before any work (:func:`check_file_outputs`;
  the partitioned driver checks its folders the same way before it starts);
* repeated record ids are reported or refused before anything is written
  (:func:`check_duplicate_ids`, which the partitioned driver calls too);
* the release is written atomically (:func:`open_release`), or to standard output once
  everything is written (:func:`stdout_when_done`): nothing partial is left on an error.

``textdp obfuscate``'s own public settings are :func:`obfuscate_settings`. The module imports no
numpy (the command checks its options with it before any heavy import).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..errors import DocumentError
from ..io import atomic_writer, check_output_paths, duplicate_ids_message, find_duplicate_ids, settings_path

if TYPE_CHECKING:
    from ..mechanisms import TextMechanism

__all__ = ["DuplicateIdsCallback", "check_duplicate_ids", "check_file_outputs", "obfuscate_settings", "open_release",
           "stdout_when_done"]


#: ``on_duplicate_ids(count, first_id)``: told about repeated record ids (a warning, in the CLI)
DuplicateIdsCallback = Callable[[int, str], None]


def check_duplicate_ids(ids: Callable[[], Iterable[str]], *, strict: bool,
                        on_duplicate_ids: DuplicateIdsCallback | None) -> None:
    """Refuse (``strict``) or report (``on_duplicate_ids(count, first_id)``) repeated record ids.

    ``ids()`` yields the record ids in input order; it is not called when nobody asks.
    """
    if not (strict or on_duplicate_ids is not None):
        return
    n_dup, first_dup = find_duplicate_ids(ids)
    if n_dup and first_dup is not None:
        if strict:
            raise DocumentError(duplicate_ids_message(n_dup, first_dup) + "; make the ids unique")
        if on_duplicate_ids is not None:
            on_duplicate_ids(n_dup, first_dup)


def check_file_outputs(output: Path | None, private_report: Path | None, *, inputs: Sequence[Path | None],
                       force: bool, new_folders: bool = True) -> None:
    """Refuse outputs that exist (unless ``force``) or that are inputs: the release, its settings, the report
    (``new_folders=False``, as the command line checks: also one in a folder that does not exist)."""
    check_output_paths(
        [("--output", output), ("--output's settings file", None if output is None else settings_path(output)),
         ("--private-report", private_report)],
        inputs=inputs, force=force, new_folders=new_folders,
    )


@contextlib.contextmanager
def stdout_when_done(stream: IO[str] | None = None) -> Iterator[IO[str]]:
    """A file that goes to ``stream`` (standard output) only once everything is written (nothing partial)."""
    with tempfile.SpooledTemporaryFile(max_size=32 << 20, mode="w+", encoding="utf-8", newline="\n") as tmp:
        yield tmp
        tmp.seek(0)
        out = sys.stdout if stream is None else stream
        shutil.copyfileobj(tmp, out)
        out.flush()


def open_release(output: Path | None, *, force: bool = False) -> contextlib.AbstractContextManager[IO[str]]:
    """The release file, written atomically (``None``: standard output, once everything is written)."""
    return stdout_when_done() if output is None else atomic_writer(output, overwrite=force, private=False)


def obfuscate_settings(mech: TextMechanism, *, known_source: bool, stop_words: str | None,
                       extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """``textdp obfuscate``'s own public settings (beside the guarantee's): stop words, decoder, known source."""
    from ..pipeline import mechanism_decoder

    return {"stop_words": stop_words, "decoder": mechanism_decoder(mech), "known_source": bool(known_source),
            **(extra or {})}
