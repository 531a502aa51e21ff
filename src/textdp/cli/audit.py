"""``textdp audit MECHANISM``: check empirically that a mechanism does not exceed its claimed ε.

Exit status: 0 when the audit passed (its lower bound on the privacy loss is at most the claimed
ε), 1 when it flagged a violation, 2 on bad input (one-line ``error: ...``).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import ParameterError, TextDPError
from ._common import Interrupted, ParamOption, bar_progress, err_console, parse_param_options, progress_bar

if TYPE_CHECKING:
    from ..audit import AuditResult

_LIRA = "Membership inference (--attack lira)"
_REPLAY = "Record and replay of the sampled sensitivity (--replay)"
#: ``--keywords-from``'s default (the LIRA attack's three releases); ``--replay`` reads it as ``noisy``.
_LIRA_MODES = "noisy,model,fixed"

#: The ε range the auditor accepts (claims beyond ~ln(samples) cannot be resolved anyway).
EPSILON_RANGE = (1e-3, 100.0)

AUDIT_HELP = (
    "Audit a mechanism: a statistical lower bound on its privacy loss, compared with the claimed "
    "epsilon.\n\n"
    "The auditor samples the mechanism many times on two neighbouring inputs chosen where its privacy "
    "loss should be largest, and computes a Clopper-Pearson lower confidence bound on that loss from "
    "the frequencies of output events (decoded words, or tails of a one-dimensional statistic). "
    "Half of the samples choose the event, the other half bound it. Where the claimed law is known "
    "(every word-level case, earth-movers, syntf with bags of one term, and every topic-matrix case; "
    "docs/audit.md) the whole privacy curve delta(eps') of the outputs is "
    "also compared with the claimed law's, computed from the public parameters only, which catches "
    "weakened noise that no single event can show. The audit PASSES when the lower bound is at most the claimed epsilon (for metric "
    "DP: epsilon times the distance of the pair) and the curve stays within the claimed one, and "
    "flags a VIOLATION otherwise. A pass is evidence, not a proof.\n\n"
    "Exit status: 0 = passed, 1 = violation flagged, 2 = bad input.\n\n"
    "With --attack lira (topicdp only) it runs a user-level membership-inference attack (LiRA with "
    "shadow LDA models on random halves of the users) against the non-private, TopicDP, Laplace and "
    "MVG releases of a corpus (keywords read off the noisy values, the covered default; or chosen by the "
    "model; or fixed columns) and prints TPR at 0.1% and 1% FPR, and whether each TPR interval is "
    "consistent with the DP bound (docs/topics-membership.md). --sensitivity sampled attacks TopicDP as users "
    "run it (the sampler's 285 pairs of fits at gamma 0.1, cached).\n\n"
    "Every case samples the release path (privatize_batch or the family's release function, with the real "
    "decoder, rounding and post-processing), and its claim comes from the audit's own accountant "
    "(textdp.audit.accountant), never from the mechanism's calibration. --conformance also tests the "
    "released outputs against an independent reference of the paper's law (chi-square or Kolmogorov-Smirnov): "
    "a change of law that stays under a loose bound is flagged there. --all audits every registered case at "
    "its defaults, with the conformance test where the case has one (seeds fixed up front from --seed), "
    "and lists every registered mechanism that no case checks as NOT AUDITED.\n\n"
    "The word-level cases take the mechanism's own parameters with --param (the claim is computed "
    "from them too), e.g. `textdp audit vickrey --param lambd=0.2`.\n\n"
    "Examples: `textdp audit --list`; `textdp audit laplace -e 1 --seed 1`; "
    "`textdp audit earth-movers --conformance --seed 1`; `textdp audit --all --seed 29`; "
    "`textdp audit topicdp -e 2 --delta 1e-5 --samples 1000000 --json`; "
    "`textdp audit topicdp --attack lira --corpus enron.jsonl.gz --seed 1`; "
    "`textdp audit topicdp --replay --seed 1`.\n\n"
    "With --replay (a topic-matrix mechanism) it checks the declared sensitivity against the release itself: "
    "on a public synthetic corpus and a real LDA fit, the sensitivity is sampled by the real sampler, and the real "
    "release (fit, released matrix, privatize_batch) is replayed on fresh neighbouring databases with the noise "
    "frozen; the release must not move by more than declared (docs/audit.md)."
)


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """One-line ``error: ...`` (escaped: names come from the user) and exit status 2."""
    try:
        yield
    except TextDPError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except (OverflowError, FloatingPointError) as exc:
        err_console.print(f"[bold red]error:[/] numeric overflow ({escape(str(exc))}); use a smaller "
                          "epsilon or delta", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except (KeyboardInterrupt, Interrupted) as exc:
        err_console.print("[bold red]interrupted[/]; the audit wrote nothing")
        raise typer.Exit(exc.status if isinstance(exc, Interrupted) else 130) from None


def _params(mechanism: str, items: list[str] | None) -> dict[str, object]:
    """``--param``: checked against a word or document mechanism's own parameters (the audit refuses the rest)."""
    from ..mechanisms import MECHANISM_NAMES
    from ..mechanisms.registry import entry
    from ..pipeline import parse_params

    if items and mechanism in MECHANISM_NAMES and entry(mechanism).family in ("word", "document"):
        return parse_param_options(mechanism, items, refuse_options=False)  # the audit says why
    return parse_params(items)


def _check_range(epsilon: float | None) -> None:
    if epsilon is None:
        return
    lo, hi = EPSILON_RANGE
    if not (math.isfinite(epsilon) and lo <= epsilon <= hi):
        raise ParameterError(f"--epsilon must lie in [{lo:g}, {hi:g}] for an audit, got {epsilon!r}")


def _samples(value: float) -> int:
    from ..audit.core import MAX_SAMPLES, MIN_SAMPLES

    if not math.isfinite(value) or value != int(value) or not (MIN_SAMPLES <= value <= MAX_SAMPLES):
        raise ParameterError(f"--samples must be a whole number in [{MIN_SAMPLES}, {MAX_SAMPLES:.0e}], got {value!r}")
    return int(value)


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.4f}"


def _table(r: AuditResult) -> Table:
    verdict = "[green]PASSED[/]" if r.passed else "[bold red]VIOLATION[/]"
    claim = f"{r.claimed_epsilon:.4f}" + (f" (delta {r.claimed_delta:g})" if r.claimed_delta else "")
    table = Table(title=f"privacy audit: {escape(r.mechanism)}", show_header=False)
    table.add_column("quantity")
    table.add_column("value")
    table.add_row("pair", escape(r.pair))
    table.add_row("claimed epsilon", claim)
    table.add_row("estimated epsilon (plug-in)", _fmt(r.estimated_epsilon))
    share = (2 if r.curve is not None else 1) * (2 if r.conformance is not None else 1)
    level = (f"{1 - (1 - r.confidence) / share:.2%} Clopper-Pearson; {r.confidence:.0%} with the other tests"
             if share > 1 else f"{r.confidence:.0%} Clopper-Pearson")
    table.add_row(f"lower bound ({level})", _fmt(r.lower_bound))
    table.add_row("samples per input", f"{r.samples:,}")
    table.add_row("candidate events", f"{r.events:,}")
    table.add_row("selected event", escape(r.event))
    if r.conformance is not None:
        k = r.conformance
        table.add_row("conformance", escape(k.description))
        table.add_row("conformance: test, p-value (level)", f"{escape(k.test)}, {k.p_value:.4g} ({k.alpha:g})")
        table.add_row("conformance verdict", "[green]follows the paper's law[/]" if k.passed
                      else "[bold red]does not follow the paper's law[/]")
    if r.curve is not None:
        c = r.curve
        table.add_row("privacy curve", escape(c.description))
        table.add_row("curve: closest eps'", f"{c.epsilon_prime:.4f} ({c.grid_points} tested)")
        table.add_row("curve: delta(eps') lower bound / estimate / claimed law",
                      f"{c.delta_lower:.4f} / {c.delta_estimate:.4f} / {c.delta_claimed:.4f}")
        table.add_row("curve verdict", "[green]within the claimed curve[/]" if c.passed
                      else "[bold red]above the claimed curve[/]")
    table.add_row("seeded", str(r.seeded).lower())
    table.add_row("time", f"{r.seconds:.1f} s")
    table.add_row("verdict", verdict)
    return table


def audit(
    mechanism: Annotated[str | None, typer.Argument(help="Mechanism to audit (see --list).",
                                                       show_default=False)] = None,
    epsilon: Annotated[float | None, typer.Option("--epsilon", "-e", help="Privacy parameter of the "
                                                     "mechanism (default: the case's own; see --list).",
                                                     show_default=False)] = None,
    delta: Annotated[float | None, typer.Option(help="delta of an (epsilon, delta) mechanism "
                                                   "(default: the case's own).", show_default=False)] = None,
    samples: Annotated[float | None, typer.Option("--samples", "-s", help="Outputs drawn from each input "
                                                  "(e.g. 1e6; default: the case's own, 1e5, or 1e4 for the "
                                                  "topic matrices).", show_default=False)] = None,
    conformance: Annotated[bool, typer.Option("--conformance", help="Also test the released outputs against an "
                                              "independent reference of the paper's law.")] = False,
    all_cases: Annotated[bool, typer.Option("--all", help="Audit every registered case at its defaults "
                                            "(with --conformance where the case has one; at most 1e4 outputs "
                                            "per input each unless --samples).")] = False,
    param: ParamOption = None,
    seed: Annotated[int | None, typer.Option(help="Seed for a reproducible audit (default: fresh OS "
                                                "entropy).", show_default=False)] = None,
    confidence: Annotated[float, typer.Option(help="Confidence level of the lower bound.")] = 0.95,
    as_json: Annotated[bool, typer.Option("--json", help="Emit a JSON object instead of a table.")] = False,
    list_cases: Annotated[bool, typer.Option("--list", help="List the mechanisms that can be audited.")] = False,
    attack: Annotated[str, typer.Option(help="privacy: the statistical audit; lira: membership inference "
                                        "with shadow models on a corpus (topicdp only).",
                                        rich_help_panel=_LIRA)] = "privacy",
    corpus: Annotated[Path | None, typer.Option(help="JSON-lines corpus of users' documents (--attack lira).",
                                                show_default=False, rich_help_panel=_LIRA)] = None,
    user_field: Annotated[str, typer.Option(help="Field naming the user.", rich_help_panel=_LIRA)] = "author",
    models: Annotated[int, typer.Option(help="Shadow models (each on a random half of the users).",
                                        rich_help_panel=_LIRA)] = 64,
    topics: Annotated[int, typer.Option(help="LDA topics (all released: m = topics).",
                                        rich_help_panel=_LIRA)] = 5,
    keywords: Annotated[str, typer.Option(help="Keywords per topic (n), or several: 20,500.",
                                          rich_help_panel=_LIRA)] = "20",
    keywords_from: Annotated[str, typer.Option(help="Releases attacked: noisy (the covered default), model "
                                               "(keywords chosen by the model), fixed. With --replay: the release "
                                               "replayed, noisy (default, as textdp topics) or model.",
                                               rich_help_panel=_LIRA)] = _LIRA_MODES,
    sensitivity: Annotated[str, typer.Option(help="worst-case (sqrt(2m)) or sampled (TopicDP as users run "
                                             "it, gamma 0.1).", rich_help_panel=_LIRA)] = "worst-case",
    vocabulary: Annotated[int, typer.Option(help="Vocabulary size of the corpus.", rich_help_panel=_LIRA)] = 500,
    max_docs_per_user: Annotated[int, typer.Option(help="Documents kept per user.",
                                                   rich_help_panel=_LIRA)] = 30,
    min_user_docs: Annotated[int, typer.Option(help="Users with fewer documents are dropped.",
                                               rich_help_panel=_LIRA)] = 1,
    epsilons: Annotated[str, typer.Option(help="Comma-separated epsilons of the private releases.",
                                          rich_help_panel=_LIRA)] = "1,10,100,1000",
    replay: Annotated[bool, typer.Option("--replay", help="Record and replay: the declared sensitivity against "
                                         "the real release on neighbouring databases (topic-matrix mechanisms).",
                                         rich_help_panel=_REPLAY)] = False,
    pairs: Annotated[int, typer.Option(help="Fresh neighbouring pairs replayed (two LDA fits each).",
                                       rich_help_panel=_REPLAY)] = 24,
    gamma: Annotated[float, typer.Option(help="gamma of the sampled sensitivity (random DP).",
                                         rich_help_panel=_REPLAY)] = 0.3,
) -> None:
    """Audit a mechanism's claimed epsilon empirically (exit 0 = passed, 1 = violation, 2 = bad input)."""
    with _errors():
        if list_cases:
            _list_cases(as_json)
            return
        if all_cases:
            if _audit_all(mechanism, param, epsilon, delta, replay, samples, seed, confidence, as_json):
                raise typer.Exit(1)
            return
        if mechanism is None:
            raise ParameterError("name a mechanism to audit (textdp audit --list shows them)")
        if replay:
            replayed = _replayed(keywords_from, conformance=conformance, samples=samples, param=param, attack=attack)
            if _replay(mechanism, epsilon, delta, pairs, gamma, seed, 1.0 - confidence, as_json, replayed):
                return
            raise typer.Exit(1)
        if attack not in ("privacy", "lira"):
            raise ParameterError(f"unknown --attack {attack!r}; choose privacy or lira")
        if attack == "lira":
            _lira(mechanism, corpus, user_field, models, topics, keywords, vocabulary, max_docs_per_user,
                  min_user_docs, epsilons, delta, seed, as_json, keywords_from, sensitivity)
            return
        result = _audit_privacy(mechanism, epsilon, delta, samples, seed, confidence, param, conformance, as_json)
    if not result.passed:
        raise typer.Exit(1)


#: Outputs per input of each case in ``--all`` without ``--samples``: at most this many (a case's own
#: default when smaller; the known-bad variants, which must be flagged, keep theirs). docs/audit.md
#: gives the power of the audit at this size, measured on the real samplers (tools/audit_power.py).
ALL_SAMPLES = 10_000


def _list_cases(as_json: bool) -> None:
    """``textdp audit --list``: the auditable mechanisms, as JSON or a table."""
    from ..audit import describe_audit_cases

    cases = describe_audit_cases()
    if as_json:
        typer.echo(json.dumps(cases, indent=2))
        return
    table = Table(title="mechanisms textdp audit can check")
    table.add_column("mechanism")
    table.add_column("audit case")
    for name, text in cases.items():
        table.add_row(escape(name), escape(text))
    Console(highlight=False).print(table)


def _audit_all(mechanism: str | None, param: list[str] | None, epsilon: float | None, delta: float | None,
               replay: bool, samples: float | None, seed: int | None, confidence: float, as_json: bool) -> int:
    """``--all``, which takes none of the options of one case; the number of cases flagged."""
    if mechanism is not None or param or epsilon is not None or delta is not None or replay:
        raise ParameterError("--all audits every case at its defaults: drop the mechanism name, --epsilon, "
                             "--delta, --param and --replay")
    return _all(None if samples is None else _samples(samples), seed, confidence, as_json)


def _replayed(keywords_from: str, *, conformance: bool, samples: float | None, param: list[str] | None,
              attack: str) -> str:
    """``--replay`` runs alone; the release it replays (``noisy`` or ``model``)."""
    if conformance or samples is not None or param or attack != "privacy":
        raise ParameterError("--replay runs the record-and-replay audit alone: drop --conformance, "
                             "--samples, --param and --attack")
    replayed = "noisy" if keywords_from == _LIRA_MODES else keywords_from
    if replayed not in ("noisy", "model"):
        raise ParameterError(f"--replay replays one release: --keywords-from noisy (the covered default of "
                             f"textdp topics) or model, got {keywords_from!r}")
    return replayed


def _audit_privacy(mechanism: str, epsilon: float | None, delta: float | None, samples: float | None,
                   seed: int | None, confidence: float, param: list[str] | None, conformance: bool,
                   as_json: bool) -> AuditResult:
    """The statistical audit of one case, printed as JSON or a table; its result."""
    from ..audit import audit as run

    _check_range(epsilon)
    n = None if samples is None else _samples(samples)
    params = _params(mechanism, param)
    with progress_bar() as bar:  # on stderr, only on a terminal
        task = bar.add_task(f"auditing {mechanism}", total=None)
        result = run(mechanism, epsilon=epsilon, delta=delta, samples=n, seed=seed, confidence=confidence,
                     progress=bar_progress(bar, task), params=params, conformance=conformance)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, allow_nan=False, ensure_ascii=False))
    else:
        Console(highlight=False, soft_wrap=True).print(_table(result))
    return result


def _all(samples: int | None, seed: int | None, confidence: float, as_json: bool) -> int:
    """``--all``: every registered case at its defaults; returns the number of cases flagged.

    Each case gets its own seed, derived up front from ``--seed`` and the case's name (SHA-256), so
    a flagged case cannot be re-run with another seed by accident; without ``--seed`` each draws
    fresh OS entropy. The conformance test runs wherever the case has one. Without ``--samples``
    each case draws ``min(its default, ALL_SAMPLES)`` outputs per input (minutes in all on 2 cores).
    The known-bad variants (:data:`textdp.audit.lm.KNOWN_BAD`) must be flagged: one that passes
    counts as a failure. Each case's time counts building it (vocabulary, output sets) and its audit.
    """
    import hashlib
    import time

    from ..audit import audit_case, audit_case_names, run_audit
    from ..audit.lm import KNOWN_BAD
    from ..audit.registry import not_audited
    from ..errors import TextDPError

    rows, out, seconds = [], [], []
    skipped: dict[str, str] = {}  # a case that cannot be built here (a missing extra): named, the others still run
    for name in audit_case_names():
        t0 = time.perf_counter()
        try:
            case = audit_case(name)
        except TextDPError as exc:
            skipped[name] = str(exc).splitlines()[0]
            if not as_json:
                err_console.print(f"{escape(name)}: NOT RUN ({escape(skipped[name])})", highlight=False)
            continue
        case_seed = None if seed is None else int.from_bytes(
            hashlib.sha256(f"textdp-audit-all:{seed}:{name}".encode()).digest()[:8], "big")
        n = samples
        if n is None and name not in KNOWN_BAD:
            n = min(case.default_samples, ALL_SAMPLES)
        r = run_audit(case, samples=n, seed=case_seed, confidence=confidence,
                      conformance=case.conformance is not None)
        seconds.append(time.perf_counter() - t0)
        out.append({**r.to_dict(), "seed": case_seed, "seconds": round(seconds[-1], 1)})
        rows.append(r)
        if not as_json:
            err_console.print(f"{escape(name)}: {'passed' if r.passed else 'VIOLATION'} ({r.samples:,} per input, "
                              f"{seconds[-1]:.0f} s)", highlight=False)
    failed = sum(r.passed == (r.mechanism in KNOWN_BAD) for r in rows)
    k = sum(r.mechanism not in KNOWN_BAD for r in rows)
    note = (f"{k} cases, each with a false-alarm rate of at most {1 - confidence:.0%}: a correct library shows "
            f"{k * (1 - confidence):.1f} false alarms on average and at least one with probability up to "
            f"{1 - confidence ** k:.0%} (independent seeds, fixed up front); {len(KNOWN_BAD)} known-bad variants "
            f"must be flagged; {failed} case(s) wrong; {sum(seconds):.0f} s in all")
    if skipped:
        note += f"; NOT RUN, so not checked: {', '.join(skipped)} (see above why)"
    unaudited = not_audited()  # registered mechanisms no case checks: named, never a silent gap
    if unaudited:
        note += f"; NOT AUDITED (no independent claim registered): {', '.join(unaudited)}"
    from ..audit.options import not_audited_options

    gaps = not_audited_options()  # options that change a law no case samples yet: named too
    if gaps:
        note += "; options NOT AUDITED: " + ", ".join(f"{m} {k}" for m, opts in gaps.items() for k in opts)
    meaning = FLAG_MEANING.format(level=f"{1 - confidence:.0%}", k=k, mean=k * (1 - confidence))
    rechecks = {r.mechanism: recheck_command(r, seed) for r in rows if not r.passed and r.mechanism not in KNOWN_BAD}
    if as_json:
        typer.echo(json.dumps({"cases": out, "flagged": failed, "not_run": skipped, "not_audited": unaudited,
                               "not_audited_options": gaps, "note": note, "flag_meaning": meaning,
                               "recheck": rechecks}, indent=2, allow_nan=False))
        return failed
    _print_all(rows, seconds, unaudited, gaps)
    typer.echo(note)
    typer.echo(meaning)
    for name, command in rechecks.items():
        typer.echo(f"re-audit {name}: {command}")
    return failed


def _print_all(rows: list[AuditResult], seconds: list[float], unaudited: dict[str, str],
               gaps: dict[str, dict[str, str]]) -> None:
    """``--all``'s table, then the mechanisms and options no case audits."""
    from ..audit.lm import KNOWN_BAD

    table = Table(title="textdp audit --all")
    for col in ("case", "claim", "lower bound", "curve", "conformance", "verdict", "time"):
        table.add_column(col)
    for r, secs in zip(rows, seconds, strict=True):
        claim = f"{r.claimed_epsilon:.3g}" + (f", {r.claimed_delta:g}" if r.claimed_delta else "")
        curve = "-" if r.curve is None else ("ok" if r.curve.passed else "[bold red]above[/]")
        conf = "-" if r.conformance is None else (f"ok (p={r.conformance.p_value:.2g})" if r.conformance.passed
                                                  else f"[bold red]p={r.conformance.p_value:.2g}[/]")
        if r.mechanism in KNOWN_BAD:
            verdict = "[green]flagged (known bad)[/]" if not r.passed else "[bold red]PASSED (known bad!)[/]"
        else:
            verdict = "[green]PASSED[/]" if r.passed else "[bold red]VIOLATION[/]"
        table.add_row(escape(r.mechanism), claim, _fmt(r.lower_bound), curve, conf, verdict, f"{secs:.0f} s")
    Console(highlight=False, soft_wrap=True).print(table)
    for name, why in unaudited.items():
        typer.echo(f"{name}: NOT AUDITED ({why})")
    for name, opts in gaps.items():
        for key, why in opts.items():
            typer.echo(f"{name} {key}: option NOT AUDITED ({why})")


#: What a flag of ``--all`` means, printed under its table (``{level}``: 1 - confidence; ``{k}`` cases).
FLAG_MEANING = ("A flag (VIOLATION) means that in this one run one of the case's tests crossed its level: the event "
                "or curve lower bound above the claim, or a conformance p-value below its share of {level}. A "
                "correct mechanism is flagged with probability at most {level} per case ({mean:.1f} false alarms "
                "expected in {k} cases), so one flag is weak evidence: re-audit it once, at 10x the samples, with "
                "the new seed below (fixed now, before looking), and treat a second failure as a bug "
                "(docs/audit.md, \"--all: what a pass means family-wise\").")


def recheck_seed(seed: int | None, name: str) -> int:
    """The new seed that re-audits a case flagged by ``--all --seed S``: SHA-256 of ``textdp-audit-recheck:S:NAME``
    (another stream than the run's own ``textdp-audit-all:S:NAME``); without ``--seed``, fresh OS entropy, drawn
    and printed before the re-audit runs.

    >>> recheck_seed(29, "santext") == recheck_seed(29, "santext") != recheck_seed(30, "santext")
    True
    """
    import hashlib
    import secrets

    if seed is None:
        return secrets.randbits(63)
    return int.from_bytes(hashlib.sha256(f"textdp-audit-recheck:{seed}:{name}".encode()).digest()[:8], "big") >> 1


def recheck_command(r: AuditResult, seed: int | None) -> str:
    """The exact command that re-audits the flagged case of ``r`` at 10x its samples with a new fixed seed."""
    conformance = " --conformance" if r.conformance is not None else ""
    return f"textdp audit {r.mechanism}{conformance} --samples {10 * r.samples} --seed {recheck_seed(seed, r.mechanism)}"


def _replay(mechanism: str, epsilon: float | None, delta: float | None, pairs: int, gamma: float,
            seed: int | None, alpha: float, as_json: bool, keywords_from: str = "noisy") -> bool:
    """``--replay``: :func:`textdp.audit.replay.replay_audit` in the audit's report style; True when it passed."""
    import time

    from ..audit.replay import replay_audit
    from ..mechanisms import names

    if mechanism not in names("topics"):
        raise ParameterError(f"--replay audits the sensitivity of a topic-matrix release; {mechanism!r} is not one "
                             f"(choose one of {', '.join(names('topics'))})")
    _check_range(epsilon)
    if not 0 < pairs <= 1000:
        raise ParameterError(f"--pairs must be a whole number in [1, 1000], got {pairs}")
    if not (math.isfinite(gamma) and 0 < gamma < 1):
        raise ParameterError(f"--gamma must lie in (0, 1), got {gamma!r}")
    t0 = time.perf_counter()
    with progress_bar() as bar:  # on stderr, only on a terminal
        bar.add_task(f"replaying {mechanism}", total=None)
        r, settings = replay_audit(mechanism, epsilon=epsilon, delta=delta, gamma=gamma, pairs=pairs, alpha=alpha,
                                   seed=seed, keywords_from=keywords_from)
    seconds = time.perf_counter() - t0
    if as_json:
        typer.echo(json.dumps({"mechanism": mechanism, "passed": r.passed, "seconds": round(seconds, 1),
                               "settings": settings, "replay": r.to_dict()}, indent=2, allow_nan=False))
        return r.passed
    table = Table(title=f"sensitivity replay: {escape(mechanism)}", show_header=False)
    table.add_column("quantity")
    table.add_column("value")
    table.add_row("corpus", escape(str(settings["corpus"])))
    table.add_row("model", escape(str(settings["model"])))
    table.add_row("released matrix", f"{r.shape[0]} x {r.shape[1]} ({escape(str(settings['released']))})")
    if r.keywords is not None:
        table.add_row("keywords = top of the replayed noisy rows",
                      "yes" if r.keyword_mismatches == 0 else f"[bold red]NO[/] ({r.keyword_mismatches} releases)")
    table.add_row("declared sensitivity", f"{r.declared:.6g} ({escape(str(settings['sensitivity']))}"
                  + (f", gamma {r.gamma:g})" if r.gamma is not None else ")"))
    table.add_row(f"bound on the released change ({r.norm}, with the grid)", f"{r.bound:.6g}")
    table.add_row("neighbouring pairs replayed (noise frozen)", f"{r.pairs:,}")
    table.add_row("pairs above the bound", f"{r.exceedances} (largest change {max(r.distances):.6g})")
    if r.gamma is not None:
        table.add_row("p-values: sampler's order statistic / gamma / shift", f"{r.p_value:.4g} / "
                      f"{r.claim_p_value:.4g} / {r.shift_p_value:.4g} (each at {r.alpha / 3:.3g})")
        table.add_row("declared value is the sampler's order statistic", "yes" if r.consistent else "[bold red]NO[/]")
    else:
        table.add_row("rule", "a global bound: no pair may exceed it")
    table.add_row("seeded", str(bool(settings["seeded"])).lower())
    table.add_row("time", f"{seconds:.1f} s")
    table.add_row("verdict", "[green]PASSED[/]" if r.passed else "[bold red]VIOLATION[/]")
    Console(highlight=False, soft_wrap=True).print(table)
    return r.passed


def _lira(mechanism: str, corpus: Path | None, user_field: str, models: int, topics: int, keywords: str,
          vocabulary: int, max_docs_per_user: int, min_user_docs: int, epsilons: str, delta: float | None,
          seed: int | None, as_json: bool, keywords_from: str = "noisy,model,fixed",
          sensitivity: str = "worst-case") -> None:
    """``--attack lira``: the membership-inference table (:mod:`textdp.audit.lira`)."""
    from ..audit.lira import FPRS, run_lira
    from ..mechanisms import names
    from ..topics import UserCorpus

    if mechanism not in names("topics"):
        raise ParameterError("--attack lira runs on topic-model releases: use `textdp audit topicdp --attack lira`")
    if corpus is None:
        raise ParameterError("--attack lira needs --corpus FILE.jsonl[.gz] (documents with a user field)")
    if not corpus.is_file():
        raise ParameterError(f"--corpus {corpus} is not a file")
    try:
        eps = [float(x) for x in epsilons.split(",") if x.strip()]
    except ValueError:
        raise ParameterError(f"--epsilons must be comma-separated numbers, got {epsilons!r}") from None
    if not eps or not all(math.isfinite(e) and e > 0 for e in eps):
        raise ParameterError(f"--epsilons must be positive numbers, got {epsilons!r}")
    ns = [k.strip() for k in keywords.split(",") if k.strip()]
    if not ns or not all(k.isdigit() and int(k) > 0 for k in ns):
        raise ParameterError(f"--keywords must be positive whole numbers (e.g. 20 or 20,500), got {keywords!r}")
    from ..audit.lira import KEYWORD_MODES

    modes = [k.strip() for k in keywords_from.split(",") if k.strip()]
    if not modes or not set(modes) <= set(KEYWORD_MODES):
        raise ParameterError(f"--keywords-from takes some of {', '.join(KEYWORD_MODES)}, got {keywords_from!r}")
    if sensitivity not in ("worst-case", "sampled"):
        raise ParameterError(f"--sensitivity must be worst-case or sampled, got {sensitivity!r}")
    dlt = 1e-5 if delta is None else delta
    users = UserCorpus.from_jsonl(corpus, user_field=user_field, max_docs_per_user=max_docs_per_user,
                                  max_features=vocabulary, min_df=3, min_user_docs=min_user_docs)
    mechs: list[tuple[str, float | None]] = [("none", None)]
    mechs += [(name, e) for name in ("topicdp", "topicdp-laplace", "mvg") for e in eps]
    from ..topics import default_cache_dir

    with progress_bar(disable=as_json) as bar:
        task = bar.add_task("LiRA: shadow models", total=models)
        rows, settings = run_lira(users, models=models, n_topics=topics, m=topics, n=[int(k) for k in ns],
                                  mechanisms=mechs, keywords=modes, delta=dlt, seed=seed, sensitivity=sensitivity,
                                  cache_dir=default_cache_dir(), progress=bar_progress(bar, task))
    if as_json:
        typer.echo(json.dumps({"settings": settings, "rows": [r.to_dict() for r in rows]}, indent=2))
        return
    table = Table(title=f"LiRA membership inference, user level ({models} shadow models, "
                        f"{rows[0].trials_in + rows[0].trials_out:,} trials)")
    for col in ("keywords", "n", "release", "sensitivity", "epsilon", "AUC",
                *(f"TPR @ {f:.1%} FPR [95% CI]" for f in FPRS), *(f"DP bound @ {f:.1%}" for f in FPRS),
                "within DP bound"):
        table.add_column(col)
    for r in rows:
        ok = r.consistent
        table.add_row(r.keywords, str(r.n), r.mechanism, r.sensitivity, "-" if r.epsilon is None else f"{r.epsilon:g}",
                      f"{r.auc:.3f}",
                      *(f"{t:.2%} [{lo:.2%}, {hi:.2%}]" for t, lo, hi in zip(r.tpr, r.tpr_low, r.tpr_high,
                                                                            strict=True)),
                      *("-" if r.epsilon is None else f"{b:.2%}" for b in r.dp_bound),
                      "-" if ok is None else "yes" if all(ok) else "[bold red]NO[/]")
    Console(highlight=False, soft_wrap=True).print(table)
    typer.echo(f"settings: {json.dumps(settings)}")


def register(app: typer.Typer) -> None:
    """Add the ``audit`` command to ``app``."""
    app.command("audit", help=AUDIT_HELP)(audit)
