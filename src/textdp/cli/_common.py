"""Helpers shared by the CLI commands: errors, signals, progress bars, help rendering, epsilon help.

File names, ids, field names and words come from the user and must never be read as
rich markup (``[/x]`` would crash the renderer, ``[tag]`` would vanish): print them
with :func:`print_error`, :func:`print_warning` and :func:`print_info`, which style
with :class:`rich.text.Text` spans and print the message verbatim. Progress
descriptions are not markup either, and the help renderer escapes every help string.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.style import StyleType
from rich.table import Table
from rich.text import Text
from typer._click import exceptions as click_errors  # typer's own copy of click raises these
from typer._click.core import Command as ClickCommand
from typer._click.core import Context, Parameter
from typer._click.formatting import HelpFormatter
from typer.core import TyperCommand, TyperGroup

from .._validation import EPSILON_MAX, EPSILON_MIN
from ..errors import OutputExistsError, ParameterError, TextDPError
from ..io import INPUT_FORMATS, not_a_regular_file
from ..progress import ProgressCallback, StageProgress
from ._choices import choice

EPSILON_OPTION_HELP = (
    f"Privacy parameter, in [{EPSILON_MIN:g}, {EPSILON_MAX:g}]. Smaller = more noise = more privacy. Noise per "
    "word has mean length dimension/epsilon (5 for GloVe 50d at epsilon 10, where ~74% of words survive; ~3% "
    "survive at 4)."
)

EPSILON_HELP_TEXT = (
    "What epsilon means: it is a privacy dial. Every word is moved in embedding space by random noise "
    "whose typical size is (dimension / epsilon) and then replaced by the nearest real word. "
    "Small epsilon = big noise = words change a lot = strong privacy; large epsilon = little noise = "
    "the text survives = weak privacy. The guarantee: for two documents of N words at Earth Mover's "
    "distance E_d, any output is at most exp(epsilon·N·E_d) times more likely from one than from the other "
    "(e.g. epsilon=10, N=20 and documents 0.01 apart: factor exp(2) = 7.4). Supported range: "
    f"{EPSILON_MIN:g} to {EPSILON_MAX:g} (on GloVe 50d, epsilon matters between about 0.01 and 100)."
)

FORCE_HELP = "Replace existing output files. Default: refuse. An input is never replaced, even with --force."

# -- options that several commands declare the same way (one name per concept: docs/glossary.md) ----------
ForceOption = Annotated[bool, typer.Option("--force", help=FORCE_HELP)]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
ReportForceOption = Annotated[bool, typer.Option(
    "--force", help=FORCE_HELP + " The report folder must otherwise be new or empty.")]
TextFieldOption = Annotated[str, typer.Option(help="Text field of JSONL input.")]
StopWordsOption = Annotated[str, typer.Option(help="'english' (318 words) or 'none'.")]
VocabSizeOption = Annotated[int | None, typer.Option("--vocab-size", "-k", help="Keep only the K most frequent words.")]
InputFormatOption = Annotated[str, choice(INPUT_FORMATS, help="auto: JSONL by file name, else plain text.")]
IdFieldOption = Annotated[str, typer.Option(
    help="Id field of JSONL input (copied to the record; without it, ids are sequence numbers 0, 1, 2, ...).")]
SeedOption = Annotated[int | None, typer.Option(
    help="Seed for a reproducible experiment (never recorded; anyone who knows it can undo the noise). Default: "
    "fresh OS entropy (use that for real releases).")]
#: The environment variable that gives ``--seed`` (readable by this user and root only, unlike the command line).
SEED_ENV = "TEXTDP_SEED"
#: Appended to the help of every ``--seed``.
SEED_PS_NOTE = (f"--seed is visible to every user of this machine (ps, /proc) while the command runs: give a seed "
                f"that must stay secret with --seed-file FILE (yours, mode 600) or the {SEED_ENV} environment "
                "variable instead.")
#: The --help panel of the options that say where the work runs (--engine, --scheduler, --workers, ...).
ENGINE_PANEL = "Engine"
SchedulerOption = Annotated[str | None, typer.Option(
    rich_help_panel=ENGINE_PANEL,
    help="Address of a running Dask scheduler: tls://host:8786, with the client certificates in the Dask "
    "configuration (distributed.comm.tls.*). A plain tcp:// scheduler lets anyone who reaches it run code in "
    "the workers, which hold the texts and the generator keys (warned).")]
WorkersOption = Annotated[int | None, typer.Option(
    rich_help_panel=ENGINE_PANEL, help="Worker processes of the local Dask cluster (default: one per core).")]
ThreadsOption = Annotated[int | None, typer.Option(help="Torch threads (default: torch's choice).")]
ParamOption = Annotated[list[str] | None, typer.Option(
    metavar="KEY=VALUE", help="Mechanism parameter KEY=VALUE, repeatable (e.g. t=0.75 for vickrey, lambd=0.2, "
    "beta=0.001, p=0.3, top_k=20, rate=0.3).")]

LedgerOption = Annotated[Path | None, typer.Option(
    help="PRIVATE ledger file: every release is recorded per document id (0600; never publish it beside the "
    "output). See `textdp ledger show`.")]
BudgetOption = Annotated[float | None, typer.Option(
    help="With --ledger: refuse a release that would take a document past this epsilon (composed across runs; "
    "nothing is written then).")]
DeltaBudgetOption = Annotated[float | None, typer.Option(
    help="With --budget: the total delta a document may spend (composed across runs; default 1e-3, that is 100 "
    "releases at delta=1e-5).")]
NewLedgerOption = Annotated[bool, typer.Option(
    "--new-ledger", help="With --ledger: accept the ledger as it is now (or start an empty one if it is gone) when it no longer "
    "matches what textdp last wrote; the spend it lost is forgotten. See `textdp ledger reset`.")]

#: Mechanism parameters the commands set with their own options, never with ``--param``.
OPTION_PARAMS = {"epsilon": "--epsilon", "embeddings": "--embeddings", "vocab_size": "--vocab-size",
                 "stop_words": "--stop-words", "seed": "--seed", "size": "--size", "size_from_data": "--size-from-data",
                 "bag": "--bag", "decoder": "--decoder", "known_source": "--known-source",
                 "postprocess": "--postprocess"}


def parse_param_options(mechanism: str, items: Sequence[str] | None, *, refuse_options: bool = True,
                        options: Mapping[str, str] = OPTION_PARAMS) -> dict[str, object]:
    """``--param KEY=VALUE`` for ``mechanism``: its own parameters only, and a number where it takes one.

    An unknown key lists the keys ``--param`` takes (not those with their own option, ``options``:
    parameter -> the command's option, such as ``--epsilon`` and ``--seed``); a number parameter given a
    word shows that word. ``refuse_options=False`` passes those keys through (for a command that says
    itself why it refuses them). The parameters come from the generated registry index
    (:data:`textdp.mechanisms._index.PARAMS`), so nothing is imported to check them: a bad ``--param`` is
    a fast one-line error.

    >>> parse_param_options("vickrey", ["t=0.75", "lambd=0.2"])
    {'t': 0.75, 'lambd': 0.2}
    >>> parse_param_options("vickrey", ["lambd=abc"])
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: --param lambd=abc: lambd takes a number, got 'abc' (e.g. --param lambd=0.5)
    >>> parse_param_options("vickrey", ["bogus=1"])
    Traceback (most recent call last):
    ...
    textdp.errors.ParameterError: mechanism 'vickrey' has no parameter 'bogus'; the keys --param takes for vickrey: t, lambd
    """
    if not items:
        return {}
    from .._options import parse_params
    from ..mechanisms._index import PARAMS
    from ..mechanisms.registry import entry

    params = parse_params(items)
    types = dict(PARAMS[entry(mechanism).name])
    keys = [k for k in types if k not in options]
    for key, value in params.items():
        if key in options:
            if not refuse_options:
                continue
            raise ParameterError(f"--param {key}: give it with its own option {options[key]}, not as a "
                                 "mechanism parameter")
        if key not in types:
            raise ParameterError(f"mechanism {mechanism!r} has no parameter {key!r}; the keys --param takes for "
                                 f"{mechanism}: {', '.join(keys) or 'none (it has no parameters of its own)'}")
        number = "int" if "float" not in types[key] else "float"
        if isinstance(value, str) and "str" not in types[key] and number in types[key]:
            raise ParameterError(f"--param {key}={value}: {key} takes a number, got {value!r} (e.g. --param "
                                 f"{key}={'10' if number == 'int' else '0.5'})")
    return params


#: Exit status after SIGINT / SIGTERM (128 + the signal number, as shells report it).
EXIT_SIGINT = 130
EXIT_SIGTERM = 143

#: The stderr console. It still renders markup in plain strings (callers that style with markup
#: must ``rich.markup.escape`` what they interpolate); everything printed through the helpers below
#: is a :class:`rich.text.Text`, which is never parsed as markup.
err_console = Console(stderr=True)


def _line(label: str, style: str, message: object) -> Text:
    """``label message`` with the label styled and the message verbatim (never markup)."""
    return Text.assemble((label, style), " ", str(message))


def print_error(message: object) -> None:
    """``error: message`` on stderr (one line; ``message`` is printed verbatim)."""
    err_console.print(_line("error:", "bold red", message), soft_wrap=True, highlight=False)


def print_warning(message: object) -> None:
    """``warning: message`` on stderr (``message`` is printed verbatim)."""
    err_console.print(_line("warning:", "bold yellow", message), soft_wrap=True, highlight=False)


def print_info(message: object) -> None:
    """``message`` on stderr, verbatim."""
    err_console.print(Text(str(message)), soft_wrap=True, highlight=False)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; ``status`` is the exit code (130 / 143).

    A :class:`BaseException` like :class:`KeyboardInterrupt`, so that ``except
    Exception`` clauses do not swallow it and atomic writers discard their files.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.status = 128 + signum


class InterruptedRun(TextDPError):
    """An interrupted command that left something behind (the message says what)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def raise_interrupted(signum: int, frame: types.FrameType | None) -> None:
    """The SIGINT / SIGTERM handler of the command line: raise :class:`Interrupted` (``signal.signal``)."""
    raise Interrupted(signum)


def print_interrupted(what: str) -> None:
    """``interrupted: what`` on stderr, one line."""
    err_console.print(_line("interrupted:", "bold red", what), soft_wrap=True, highlight=False)


@contextlib.contextmanager
def _signals() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into :class:`Interrupted` while the command runs (main thread only)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, raise_interrupted)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _cache_warnings() -> Iterator[None]:
    """Print a :class:`~textdp.errors.CacheWarning` (a cached file ignored and computed again) as one line."""
    import warnings

    from ..errors import CacheWarning

    original = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if issubclass(category, CacheWarning):
            print_warning(message)
        else:
            original(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always", CacheWarning)
        warnings.showwarning = show
        yield


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    """Turn expected failures into a one-line ``error: ...`` on stderr and exit code 2.

    SIGINT and SIGTERM end the command with ``interrupted ...`` and exit code 130 or
    143: atomic writers have removed their temporary files, so nothing partial is
    left unless the command raised :class:`InterruptedRun` to say what remains.
    """
    try:
        with _signals(), _cache_warnings():
            yield
    except InterruptedRun as exc:
        err_console.print(_line("interrupted:", "bold red", exc), soft_wrap=True, highlight=False)
        raise typer.Exit(exc.status) from None
    except TextDPError as exc:
        print_error(exc.cli or exc)  # the command line's words where the message has them
        raise typer.Exit(2) from None
    except UnicodeDecodeError as exc:
        print_error(f"input is not valid UTF-8 ({exc.reason})")
        raise typer.Exit(2) from None
    except UnicodeEncodeError as exc:
        print_error(f"cannot write {exc.object[exc.start:exc.end]!r} as {exc.encoding} ({exc.reason}); "
                    "the input holds text that is not valid Unicode")
        raise typer.Exit(2) from None
    except MemoryError:
        print_error("out of memory; ask for less work per run (a smaller --size, fewer documents, fewer draws)")
        raise typer.Exit(2) from None
    except OSError as exc:
        name = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print_error(f"{name}{exc.strerror or exc}")
        raise typer.Exit(2) from None
    except (KeyboardInterrupt, Interrupted) as exc:
        status = exc.status if isinstance(exc, Interrupted) else EXIT_SIGINT
        err_console.print(_line("interrupted:", "bold red", "no output was written"), soft_wrap=True,
                          highlight=False)
        raise typer.Exit(status) from None


def check_report_folder(out: Path, force: bool, inputs: tuple[Path, ...] = ()) -> None:
    """A report folder must be new or empty (or ``force``), and never a file such as the input.

    With ``force`` the report files in it are replaced, so no input may lie in it (``--force``
    is for outputs, never for an input). Checked before any work: a refused run costs nothing.
    """
    if out.exists() and not out.is_dir():
        raise ParameterError(f"the report folder {out} is {not_a_regular_file(out) or 'a file'}; give a folder")
    for q in inputs:
        if out.is_dir() and q.parent.resolve() == out.resolve():
            raise OutputExistsError(f"the input {q} lies in the report folder {out}, whose files the report "
                                    "replaces; choose another report folder (--force never replaces an input)")
    if out.is_dir():  # the report's files are replaced, never a device, FIFO or socket someone put there
        for entry in out.iterdir():
            kind = not_a_regular_file(entry)
            if kind is not None and kind != "a directory":
                raise OutputExistsError(f"the report folder {out} holds {entry}, {kind}; a report replaces regular "
                                        "files only (not even --force replaces anything else): choose another folder")
    if not force and out.is_dir() and any(out.iterdir()):
        raise OutputExistsError(f"the report folder {out} is not empty; choose a new folder, or pass --force to "
                                "replace the report files in it")


def parse_stop_words(stop_words: str) -> str | None:
    """``'english'`` or ``None`` from the ``--stop-words`` option (case-insensitive), else a one-line error."""
    s = stop_words.strip().lower()
    if s == "none":
        return None
    if s != "english":
        raise ParameterError(f"unknown stop-word list {stop_words!r}; choose 'english' or 'none'")
    return s


def progress_bar(disable: bool = False) -> Progress:
    """A rich progress bar on stderr (hidden when stderr is not a terminal unless forced)."""
    return Progress(
        TextColumn("{task.description}", markup=False, style="progress.description"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=disable or not sys.stderr.isatty(),
        transient=False,
    )


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``, ``2.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60)} s" if seconds < 3600 else f"{seconds / 3600:.1f} h"


def progress_lines(label: str, *, every: float = 30.0, emit: Callable[[str], None] = print_info,
                   clock: Callable[[], float] = time.perf_counter) -> ProgressCallback:
    """Plain progress lines for a log, where no bar is drawn (stderr is not a terminal).

    ``label: done/total (pct), T elapsed, about T left`` at most every ``every`` seconds,
    and once at the end.

    >>> ticks = iter([0.0, 10.0, 40.0, 50.0])
    >>> report = progress_lines("scanning", emit=print, clock=lambda: next(ticks))
    >>> report(1, 4); report(2, 4); report(4, 4)
    scanning: 2/4 (50%), 40 s elapsed, about 40 s left
    scanning: 4/4 (100%), 50 s elapsed
    """
    start = clock()
    last = [start]

    def report(done: int, total: int) -> None:
        now = clock()
        if done < total and now - last[0] < every:
            return
        last[0] = now
        elapsed = now - start
        left = f", about {_duration(elapsed / done * (total - done))} left" if 0 < done < total else ""
        emit(f"{label}: {done}/{total} ({done / max(total, 1):.0%}), {_duration(elapsed)} elapsed{left}")

    return report


def bar_and_lines(bar: Progress, task: TaskID, label: str, *, quiet: bool = False) -> ProgressCallback:
    """Move ``task`` of ``bar`` and, where stderr is not a terminal (no bar is drawn), print
    :func:`progress_lines` instead (none when ``quiet``)."""
    lines = None if quiet or sys.stderr.isatty() else progress_lines(label)

    def report(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)
        if lines is not None:
            lines(done, total)

    return report


# -- help rendering ---------------------------------------------------------------------------
def bar_progress(bar: Progress, task: TaskID) -> ProgressCallback:
    """The :data:`textdp.progress.ProgressCallback` that moves ``task`` of ``bar``."""
    return lambda done, total: bar.update(task, completed=done, total=total)


def bar_stages(bar: Progress) -> StageProgress:
    """The :data:`textdp.progress.StageProgress` that adds one task of ``bar`` per stage."""

    def stage(name: str, total: int) -> ProgressCallback:
        return bar_progress(bar, bar.add_task(name, total=max(total, 1)))

    return stage


def _reflow(text: str) -> str:
    """Join the lines of each paragraph (docstrings are wrapped at 120 columns; the terminal decides)."""
    import inspect

    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _plain_help(text: str | None) -> str | None:
    return None if text is None else escape(_reflow(text))


def _quiet_flags(params: list[Parameter]) -> list[Parameter]:
    for p in params:  # a flag takes no value: do not show a type such as <bool>
        if (getattr(p, "is_flag", False) or getattr(p, "count", False)) and p.metavar is None:
            p.metavar = ""
    return params


def _usage_pieces(command: TyperCommand, ctx: Context) -> list[str]:
    """``[OPTIONS] CORPUS [FILES]...``: arguments in upper case, optional ones in brackets (click's style)."""
    pieces = [command.options_metavar] if command.options_metavar else []
    for p in command.get_params(ctx):
        if getattr(p, "param_type_name", "") != "argument" or getattr(p, "hidden", False):
            continue
        name = (p.metavar or p.name or "").upper()
        name = name if p.required else f"[{name}]"
        pieces.append(name + ("..." if p.nargs != 1 else ""))
    return pieces


def _plain_helps(command: TyperCommand | TyperGroup) -> None:
    """Make the help of ``command`` and of each of its parameters plain text (escaped for rich)."""
    command.help = _plain_help(command.help)
    for p in command.params:
        if getattr(p, "help", None):
            p.help = _plain_help(p.help)  # type: ignore[attr-defined]


class _OptionTable(Table):
    """Typer's options panel with every option's names and value on a line of their own, its help below.

    Typer lays an option out in six columns (names, short name, negative names, value, help);
    at 80 columns rich then cuts long names (``--private-repo…``, ``--max-new-toke…``). Here a
    row's names are never cut (they fold if a name alone is wider than the terminal) and the
    help takes the full width under them. Tables that declare their columns (the commands
    panel) are left as they are.
    """

    _merged = False

    def add_row(self, *cells: RenderableType | None, style: StyleType | None = None,
                end_section: bool = False) -> None:
        if self.columns and not self._merged:  # declared columns: not an options panel
            super().add_row(*cells, style=style, end_section=end_section)
            return
        required, (long, short, neg_long, neg_short, value, help_) = (
            (cells[0], cells[1:]) if len(cells) == 7 else ("", cells))
        if not self._merged:
            self._merged = True
            self.add_column(no_wrap=True, width=1 if len(cells) == 7 else 0)
            self.add_column(ratio=1)
        names = Text(", ").join(_as_text(t) for t in (long, short) if str(t))  # typer's cells are Text
        negative = Text(", ").join(_as_text(t) for t in (neg_long, neg_short) if str(t))
        line = Text(" / ").join(t for t in (names, negative) if str(t))
        if str(value):
            line.append(" ")
            line.append_text(_as_text(value))
        line.overflow = "fold"
        super().add_row(required, line)
        super().add_row("", Padding(help_ if help_ is not None else "", (0, 0, 0, 4)))


def _as_text(cell: RenderableType | None) -> Text:
    """``cell`` as rich ``Text`` (a typer options cell is one already)."""
    return cell if isinstance(cell, Text) else Text(str(cell))


@contextlib.contextmanager
def _option_tables() -> Iterator[None]:
    """Render the options panels of a help screen with :class:`_OptionTable`."""
    from typer import rich_utils

    before = rich_utils.Table
    rich_utils.Table = _OptionTable  # type: ignore[misc]
    try:
        yield
    finally:
        rich_utils.Table = before  # type: ignore[misc]


# -- user-named files (issue 39 §3): every path a command reads goes through one checker -----------------
#: Path-valued parameters (by parameter name) that a command writes or keeps as PRIVATE state, each under its
#: own rule, so the public-file rule does not apply: outputs are written atomically and never replace an input
#: (check_report_folder / release); --work-dir, --cache-dir and the ledger's folder pass the private-folder rule
#: (textdp._cache.open_private_dir: every ancestor checked, the folder yours and 0700).
WRITTEN_PATHS: dict[str, str] = {
    "output": "written (atomic; never an input)",
    "private_report": "written (0600, atomic)",
    "write_training_corpus": "written (atomic)",
    "work_dir": "private folder (open_private_dir)",
    "cache_dir": "private folder (open_private_dir)",
    "ledger": "private ledger (its folder passes open_private_dir; anchored)",
}
#: Options typed ``str`` whose value may name a file (a word list, ...): the value names a file when the test
#: says so.
STRING_PATHS: dict[str, Callable[[str], bool]] = {
    "vocabulary": lambda v: v != "corpus" and not v.startswith("glove:"),
}
ALLOW_SHARED_HELP = ("Accept user-named files (inputs, embeddings, word lists, prompt files, models) that another user "
                     "owns or could change: in a folder others can write to, or reached through their link. Default: "
                     "refuse, with the component at fault named.")
_ALLOW_SHARED_KEY = "textdp.allow_shared_files"


def _path_annotation(param: Parameter) -> bool:
    """Whether ``param`` is declared as a path (``Path``, ``Path | None``, ``list[Path]``)."""
    td = getattr(param, "type_descriptor", None)
    return td is not None and "Path" in str(getattr(td, "annotation", ""))


def read_path_params(command: ClickCommand) -> list[Parameter]:
    """The parameters of ``command`` that name files it reads (checked by :func:`check_read_paths`)."""
    return [p for p in command.params if p.name not in WRITTEN_PATHS
            and (_path_annotation(p) or (p.name in STRING_PATHS
                                         and getattr(getattr(p, "type_descriptor", None), "annotation", None) is str))]


def named_paths(param: Parameter, value: object) -> list[Path]:
    """The paths the value of ``param`` names (none for ``-``, ``None`` or a string option's non-file value)."""
    if value is None:
        return []
    values: list[object] = list(value) if isinstance(value, (list, tuple)) else [value]
    if param.name in STRING_PATHS:
        values = [v for v in values if isinstance(v, str) and STRING_PATHS[str(param.name)](v)]
    return [Path(v) for v in values if isinstance(v, (str, PathLike)) and str(v) != "-"]


def check_read_paths(ctx: Context) -> None:
    """Refuse (one line, exit 2 through :func:`cli_errors`) any file or folder the command reads that others can change.

    Each named path goes through :func:`textdp._cache.check_public_path` (unless ``--allow-shared-files``): every
    folder from ``/`` down owned by root or you and not writable by others unless root-owned and sticky, links on
    the way yours or root's, and the file itself yours or root's and writable by nobody else. A pipe or device
    (``<(zcat ...)``, ``/dev/stdin``) is not a file someone can rename: it is left alone. Missing paths are left to
    the command, which says what is missing.
    """
    import os
    import stat

    from .._cache import check_public_path

    if ctx.meta.get(_ALLOW_SHARED_KEY):
        return
    for param in read_path_params(ctx.command):
        for path in named_paths(param, ctx.params.get(str(param.name))):
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                continue
            name = param.opts[0] if param.opts and param.opts[0].startswith("-") else str(param.name).upper()
            check_public_path(path, what=name)


_SEED_FILE_KEY = "textdp.seed_file"


def _remember_seed_file(ctx: typer.Context, value: Path | None) -> Path | None:
    if value is not None:
        ctx.meta[_SEED_FILE_KEY] = value
    return value


def read_seed_file(path: Path) -> int:
    """The seed in ``path``: a file of yours that nobody else can read or change (one line: a whole number >= 0)."""
    import os
    import stat

    from .._cache import read_public_file

    pub = read_public_file(path, what="--seed-file")  # every folder above it checked, the file yours or root's
    mode = stat.S_IMODE(os.stat(pub.real).st_mode)
    if mode & 0o077:
        raise ParameterError(f"--seed-file {path} can be read by others (mode {mode:o}): the seed undoes the noise; "
                             f"run chmod 600 {path}")
    text = pub.data.decode("ascii", "replace").strip()
    if not text.isdigit():
        raise ParameterError(f"--seed-file {path} must hold one whole number >= 0 (the seed), nothing else")
    return int(text)


def resolve_seed(ctx: Context) -> None:
    """``--seed``, ``--seed-file`` or ``$TEXTDP_SEED`` (one of them at most) into the command's ``seed`` parameter."""
    import os

    given = {name: v for name, v in (("--seed", ctx.params.get("seed")), ("--seed-file", ctx.meta.get(_SEED_FILE_KEY)),
                                     (SEED_ENV, os.environ.get(SEED_ENV) or None)) if v is not None}
    if len(given) > 1:
        raise ParameterError(f"give the seed once: {' and '.join(given)} were both given")
    if "--seed-file" in given:
        ctx.params["seed"] = read_seed_file(Path(given["--seed-file"]))
    elif SEED_ENV in given:
        value = str(given[SEED_ENV]).strip()
        if not value.isdigit():
            raise ParameterError(f"{SEED_ENV} must be a whole number >= 0 (the seed), got {value!r}")
        ctx.params["seed"] = int(value)


def _seed_file_param() -> Parameter:
    """A fresh ``--seed-file`` option (eager, not passed to the command's function)."""
    sub = typer.Typer(add_completion=False)

    @sub.command("flag")
    def _flag(seed_file: Annotated[Path | None, typer.Option(
            "--seed-file", help=f"Read the seed from this file (yours, mode 600): not shown by ps, unlike --seed. "
            f"Or set {SEED_ENV}.", is_eager=True, expose_value=False, callback=_remember_seed_file)] = None) -> None:
        """Only here to build the option."""

    sub.command("other")(lambda: None)  # two commands: get_command returns a group
    group = typer.main.get_command(sub)
    return group.commands["flag"].params[0]  # type: ignore[attr-defined]


def _remember_allow_shared(ctx: typer.Context, value: bool) -> bool:
    if value:
        ctx.meta[_ALLOW_SHARED_KEY] = True
    return value


def _allow_shared_param() -> Parameter:
    """A fresh ``--allow-shared-files`` flag (eager, not passed to the command's function)."""
    sub = typer.Typer(add_completion=False)

    @sub.command("flag")
    def _flag(allow_shared_files: Annotated[bool, typer.Option(
            "--allow-shared-files", help=ALLOW_SHARED_HELP, is_eager=True, expose_value=False,
            callback=_remember_allow_shared)] = False) -> None:
        """Only here to build the flag."""

    sub.command("other")(lambda: None)  # two commands: get_command returns a group
    group = typer.main.get_command(sub)
    return group.commands["flag"].params[0]  # type: ignore[attr-defined]


class Command(TyperCommand):
    """A command whose help is plain text (escaped for rich), whose flags show no ``<bool>``, whose
    usage line names its arguments the same way in every command (``CORPUS``, ``[FILES]...``) and
    whose option names are never cut (:class:`_OptionTable`).

    A command that reads user-named files also takes ``--allow-shared-files``, and every file it reads is checked
    by :func:`check_read_paths` before the command runs (issue 39 §3)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        seed = next((p for p in self.params if p.name == "seed" and "--seed" in p.opts), None)
        if seed is not None and not any(p.name == "seed_file" for p in self.params):
            seed.help = f"{(seed.help or '').rstrip()} {SEED_PS_NOTE}"  # type: ignore[attr-defined]
            self.params.insert(self.params.index(seed) + 1, _seed_file_param())
        if read_path_params(self) and not any(p.name == "allow_shared_files" for p in self.params):
            self.params.append(_allow_shared_param())
        _plain_helps(self)
        self.short_help = _plain_help(self.short_help)

    def invoke(self, ctx: Context) -> object:
        with cli_errors():
            check_read_paths(ctx)
            if any(p.name == "seed_file" for p in self.params):
                resolve_seed(ctx)
        if ctx.meta.get(_ALLOW_SHARED_KEY):
            from .._cache import allow_shared_files

            with allow_shared_files():
                return super().invoke(ctx)
        return super().invoke(ctx)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        with _option_tables():
            super().format_help(ctx, formatter)

    def get_params(self, ctx: Context) -> list[Parameter]:
        return _quiet_flags(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return _usage_pieces(self, ctx)


def _usage_error_line(exc: click_errors.ClickException) -> str:
    """A click usage error as one line: what is wrong, and where the help is."""
    msg = " ".join(exc.format_message().replace("Value error, ", "").split())
    param: Parameter | None = getattr(exc, "param", None)
    if (isinstance(exc, click_errors.MissingParameter) and param is not None
            and getattr(param, "param_type_name", "") == "argument"):
        msg = f"missing argument {(param.metavar or param.name or '').upper()}"  # as the usage line names it
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click_errors.UsageError) and ctx is not None:
        msg += f" (see: {ctx.command_path} --help)"
    return msg


class Group(TyperGroup):
    """The root group, rendered like :class:`Command`.

    Argument-parsing errors (a value that is not a number, an unknown option or choice, a
    missing argument) print one ``error: ...`` line and exit 2, like every other bad input,
    instead of typer's multi-line box.
    """

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: object) -> object:
        # "textdp", also under python -m textdp: the name messages tell the user to type
        prog = prog_name or "textdp"
        if not standalone_mode:
            return super().main(args, prog, complete_var, False, windows_expand_args, **extra)
        try:
            rv = super().main(args, prog, complete_var, False, windows_expand_args, **extra)
        except click_errors.NoArgsIsHelpError as exc:  # the help was asked for by giving nothing
            print_info(exc.ctx.get_help() if exc.ctx is not None else "")
            sys.exit(0)
        except click_errors.ClickException as exc:
            print_error(_usage_error_line(exc))
            sys.exit(exc.exit_code)
        except typer.Abort:
            err_console.print(_line("interrupted:", "bold red", "no output was written"), soft_wrap=True,
                              highlight=False)
            sys.exit(EXIT_SIGINT)
        sys.exit(rv if isinstance(rv, int) else 0)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_helps(self)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        with _option_tables():
            super().format_help(ctx, formatter)

    def get_params(self, ctx: Context) -> list[Parameter]:
        return _quiet_flags(super().get_params(ctx))
