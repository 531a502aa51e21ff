"""The single-file engine: one process, one release file (or standard output).

:func:`obfuscate_file` is what ``textdp obfuscate FILE -o out.jsonl`` runs: the same
steps as the partitioned driver (:func:`textdp.engines.corpus.obfuscate_corpus`),
done once here and shared with it where they are the same step:

* the output paths are checked before any work (:func:`check_file_outputs`;
  the partitioned driver checks its folders the same way before it starts);
* repeated record ids are reported or refused before anything is written
  (:func:`check_duplicate_ids`, which the partitioned driver calls too);
* the release records are written as they come (memory stays bounded), then the
  private report and the public ``settings.json`` beside the output, and the
  release itself is moved into place last (atomic writers: nothing partial is
  left on an error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ParameterError
from ..io import SourcedDocument
from ..mechanisms import TextMechanism
from ..progress import ProgressCallback
from ..release import DuplicateIdsCallback, check_duplicate_ids, check_file_outputs, open_release, stdout_when_done

__all__ = ["check_duplicate_ids", "check_file_outputs", "obfuscate_file", "obfuscate_settings", "open_release",
           "stdout_when_done"]

def obfuscate_file(
    mech: TextMechanism, docs: Sequence[SourcedDocument], output: Path | None, *, fmt: str = "jsonl",
    known_source: bool = False, stop_words: str | None = "english", extra: dict[str, object] | None = None,
    private_report: Path | None = None, force: bool = False, strict_ids: bool = False,
    on_duplicate_ids: DuplicateIdsCallback | None = None, progress: ProgressCallback | None = None,
    empty: str = "error", ledger: Path | None = None, budget: float | None = None,
) -> dict[str, object]:
    """Privatize ``docs`` with the fitted ``mech`` into ``output`` (``None``: standard output).

    The release driver (:func:`textdp.release.release`) with ``textdp obfuscate``'s public settings:
    writes the release records (``fmt``: ``jsonl`` or ``text``), then ``private_report``
    (PRIVATE, JSONL, mode 0600) and, beside a file output, the public
    ``<output>.settings.json``; the release is moved into place last. Returns the
    public settings. ``force`` replaces existing outputs (never an input); repeated
    ids are refused with ``strict_ids`` or reported to ``on_duplicate_ids``. ``empty``: what a
    document with no in-vocabulary word becomes (``error``, ``skip``, ``empty``). ``ledger`` and
    ``budget``: charge a private ledger before any noise (refused whole over budget).
    """
    from ..release import release

    if not docs:
        raise ParameterError("no documents in the input")
    summary = release(mech, list(docs), output, private_report=private_report, force=force, fmt=fmt, empty=empty,
                      settings=obfuscate_settings(mech, known_source=known_source, stop_words=stop_words,
                                                  extra=extra),
                      command="obfuscate", strict_ids=strict_ids, on_duplicate_ids=on_duplicate_ids,
                      progress=progress, ledger=ledger, budget=budget)
    return dict(summary.settings)


def obfuscate_settings(mech: TextMechanism, *, known_source: bool, stop_words: str | None,
                       extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """``textdp obfuscate``'s own public settings (beside the guarantee's): stop words, decoder, known source."""
    from ..pipeline import mechanism_decoder

    return {"stop_words": stop_words, "decoder": mechanism_decoder(mech), "known_source": bool(known_source),
            **(extra or {})}
