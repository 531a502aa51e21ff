"""``textdp rewrite --mechanism dp-prompt|dp-paraphrase|dp-mlm|dp-bart``: the language-model rewriters.

Called by :mod:`textdp.cli.rewrite` for these mechanisms. This module checks the options, chooses the public
clipping bounds and builds the rewriter; :func:`textdp.release.release` (the one driver) then charges the
ledger (refusing an over-budget release before anything is generated), rewrites, and writes the records,
their settings and the private report atomically; this module prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from typer.models import OptionInfo

from .._options import MAX_NEW_TOKENS
from .._validation import BudgetLike
from ..errors import ParameterError
from ._common import print_info, progress_bar

if TYPE_CHECKING:
    from ..generation.decoding import ClipBounds
    from ..generation.lm_family import LMRewriter

__all__ = ["LM_HELP", "MAX_NEW_TOKENS", "LMOptions", "check_other_options", "parse_clip",
           "parse_quantiles", "public_texts", "run_lm_rewrite"]


@dataclass(frozen=True)
class LMOptions:
    """The command-line options of the language-model path."""

    clip: str | None
    clip_public: Path | None
    delta: float
    max_new_tokens: int
    max_tokens: int
    max_input_tokens: int
    copy_stopwords: bool
    top_k: int | None
    top_p: float | None
    ledger: Path | None
    budget: BudgetLike | None
    new_ledger: bool = False
    clip_quantiles: str = "0.01,0.99"
    clip_rule: str = "auto"
    prompt: str | None = None
    prompt_file: Path | None = None
    prompt_format: str = "auto"
    prior: bool = False
    public_top_k: int | None = None
    batch_tokens: int = 16384


def parse_clip(text: str) -> tuple[float, float]:
    """``"LOW,HIGH"`` -> ``(low, high)`` (one-line error otherwise).

    >>> parse_clip("-0.2,0.1")
    (-0.2, 0.1)
    """
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        return float(parts[0]), float(parts[1])
    except ValueError:
        raise ParameterError(f"--clip must be LOW,HIGH (two numbers), got {text!r}") from None


def parse_quantiles(text: str) -> tuple[float, float]:
    """``"LOW,HIGH"`` quantiles -> ``(low, high)``, ``0 <= low < high <= 1`` (one-line error otherwise).

    >>> parse_quantiles("0.01,0.995")
    (0.01, 0.995)
    """
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        low, high = float(parts[0]), float(parts[1])
    except ValueError:
        raise ParameterError(f"--clip-quantiles must be LOW,HIGH (two numbers in [0, 1]), got {text!r}") from None
    if not 0.0 <= low < high <= 1.0:
        raise ParameterError(f"--clip-quantiles must be LOW,HIGH with 0 <= LOW < HIGH <= 1, got {text!r}")
    return low, high


def public_texts(path: Path) -> tuple[list[str], str]:
    """The texts of ``--clip-public`` and the SHA-256 of the file: one text per line of a plain-text file, the
    documents of a JSONL/Parquet file (read once, checked: :func:`textdp.io.read_public_documents`)."""
    from ..io import is_jsonl, is_parquet, read_public_documents

    if is_jsonl(path) or is_parquet(path):
        docs, sha = read_public_documents(path, what="--clip-public")
        return [d.text for d in docs], sha
    docs, sha = read_public_documents(path, what="--clip-public", input_format="text")
    return [line for d in docs for line in d.text.splitlines() if line.strip()], sha


#: Why ``--clip-public`` must not hold the private input (the end of its one-line errors).
CLIP_PUBLIC_WHY = ("the clipping bounds must come from PUBLIC text, never from the documents being rewritten (help: "
                   "--clip-public)")


def check_clip_public(path: Path, inputs: list[Path], *, text_field: str = "text", id_field: str = "id",
                      input_format: str = "auto") -> tuple[list[str], str]:
    """Refuse a ``--clip-public`` file that is an input, a copy of one, or holds an input document (one line);
    return its texts and SHA-256, read once (:func:`public_texts`): the bounds are computed from these very texts.

    The same check as ``obfuscate --domain-vocab`` (:func:`textdp.io.check_public_file`); the inputs are read
    once more here (not standard input, which can be read only once), for this refusal only.
    """
    from ..io import check_public_file, documents_found_in, read_documents

    check_public_file(path, "--clip-public", inputs, why=CLIP_PUBLIC_WHY)
    texts, sha = public_texts(path)
    files = [p for p in inputs if str(p) != "-"]
    if not files:
        return texts, sha
    docs = read_documents(files, text_field=text_field, id_field=id_field, input_format=input_format)
    found = documents_found_in(texts, (t for _, t in docs))
    if found:
        raise ParameterError(f"--clip-public {path} holds {found} of the {len(docs)} input document(s) verbatim; "
                             f"remove them from it: {CLIP_PUBLIC_WHY}")
    return texts, sha


def _bounds(model_dir: str, mechanism: type[LMRewriter], opts: LMOptions,
            public: tuple[list[str], str] | None = None) -> ClipBounds:
    from ..generation.decoding import ClipBounds
    from ..generation.lm import public_bounds

    if (opts.clip is None) == (opts.clip_public is None):
        raise ParameterError("choose the public clipping bounds: --clip LOW,HIGH, or --clip-public FILE (public "
                             "text; --clip-rule, --clip-quantiles); see docs/lm-rewriting.md")
    if opts.clip is not None:
        low, high = parse_clip(opts.clip)
        return ClipBounds(low, high, "fixed", "given by the user (--clip)")
    assert opts.clip_public is not None
    if opts.prior:
        raise ParameterError("--prior clips the difference to the public prior: give its range with --clip LOW,HIGH "
                             "(e.g. --clip=-2,2); --clip-public chooses bounds of the logits themselves")
    lo_q, hi_q = parse_quantiles(opts.clip_quantiles)
    texts, sha = public if public is not None else public_texts(opts.clip_public)
    return public_bounds(model_dir, mechanism, texts, low_quantile=lo_q, high_quantile=hi_q, rule=opts.clip_rule,
                         source=f"public text given with --clip-public (file sha256 {sha})")


def _prompt(opts: LMOptions) -> str | None:
    """``--prompt`` or the text of ``--prompt-file`` (public; recorded), or None (the format's default)."""
    if opts.prompt is not None and opts.prompt_file is not None:
        raise ParameterError("give the prompt once: --prompt TEXT or --prompt-file FILE")
    if opts.prompt_file is None:
        return opts.prompt
    from ..io import read_public_documents

    docs, _ = read_public_documents(opts.prompt_file, what="--prompt-file", input_format="text")  # the text is recorded
    return docs[0].text.rstrip("\n") if docs else ""


def check_other_options(mechanism: str, opts: LMOptions, output: Path, inputs: list[Path]) -> None:
    """The ER-AE family: refuse the options only the dp-* mechanisms read (an ignored flag would mislead)."""
    from ..generation.decoding import refuse_truncation

    refuse_truncation(opts.top_k, opts.top_p)
    for flag, given in (("--clip", opts.clip is not None), ("--clip-public", opts.clip_public is not None),
                        ("--prompt", opts.prompt is not None), ("--prompt-file", opts.prompt_file is not None),
                        ("--prior", opts.prior), ("--public-top-k", opts.public_top_k is not None)):
        if given:
            raise ParameterError(f"{flag} applies to the dp-* mechanisms, not to {mechanism}")
    _check_ledger(opts, output, inputs)


def _check_ledger(opts: LMOptions, output: Path, inputs: list[Path]) -> None:
    """The ledger options, checked before any work (:func:`textdp.release.check_ledger_options`)."""
    from ..release import check_ledger_options

    check_ledger_options(opts.ledger, budget=opts.budget, new_ledger=opts.new_ledger, output=output, inputs=inputs)


def run_lm_rewrite(model_dir: Path, inputs: list[Path], *, mechanism: str, epsilon: float, output: Path,
                   unit: str, seed: int | None, private_report: Path | None, batch_size: int, text_field: str,
                   id_field: str, input_format: str, force: bool, quiet: bool, opts: LMOptions,
                   params: Mapping[str, object] | None = None) -> None:
    """The whole language-model rewrite: build and fit the rewriter, then :func:`textdp.release.release` (the one
    driver: read, charge the ledger before any token is drawn, rewrite, write records, settings and the private
    report); this function only prints."""
    from ..generation.folders import check_model_folder
    from ..generation.hf import load_language_model
    from ..generation.lm import LMGuarantee
    from ..generation.lm_family import LMRewriter
    from ..generation.rewriter import RewrittenText
    from ..guarantees import ReleaseRecord
    from ..mechanisms import mechanism_class
    from ..release import check_file_outputs, release
    from ._common import print_warning

    def sentences(rec: ReleaseRecord) -> list[ReleaseRecord]:
        """``--unit sentence``: one record per sentence of a rewritten document."""
        assert isinstance(rec, RewrittenText)
        return rec.sentence_records()

    public_inputs = [opts.clip_public, opts.prompt_file]
    # every path is checked before the model is loaded and the public bounds computed (the driver checks again)
    _check_ledger(opts, output, inputs)  # first, as for the other rewriters: a ledger that is an input is said so
    check_file_outputs(output, private_report, inputs=[*inputs, *public_inputs, opts.ledger], force=force,
                       new_folders=False)
    public = None
    if opts.clip_public is not None:  # before the model is loaded: a refused run costs nothing
        public = check_clip_public(opts.clip_public, inputs, text_field=text_field, id_field=id_field,
                          input_format=input_format)
    where = str(check_model_folder(model_dir))  # links may not leave the folder
    cls = mechanism_class(mechanism)
    assert issubclass(cls, LMRewriter)
    build: Callable[..., LMRewriter] = cls  # the keyword values are checked by the class itself
    mech = build(epsilon=epsilon, model=where, clip=_bounds(where, cls, opts, public),
                 **_own_params(cls, opts, batch_size), **(params or {}))  # ``params``: the class's own parameters given with --param
    mech.fit()
    per_sentence = unit == "sentence" and mech.privacy_unit == "sentence"
    with progress_bar(disable=quiet) as bar:
        task = bar.add_task(f"rewriting ({mechanism})", total=None)
        done = release(
            mech, list(inputs), output, ledger=opts.ledger, budget=opts.budget, new_ledger=opts.new_ledger,
            private_report=private_report, private_details={}, command="rewrite", seed=seed, empty="empty",
            force=force, text_field=text_field, id_field=id_field, input_format=input_format, inputs=public_inputs,
            settings={"model": load_language_model(where, cls.kind).identity, "settings": mech.public_settings(),
                      "record_unit": unit},
            records_of=sentences if per_sentence else None,
            progress=lambda n, total: bar.update(task, completed=n, total=total))
    if done.ledger_note is not None:
        print_warning(done.ledger_note)
    g = done.guarantee
    assert isinstance(g, LMGuarantee)
    tok = f" ({g.per_token:.4g} per token, {g.steps} steps)" if g.per_token is not None else ""
    dl = f", delta={g.delta:.3g}" if g.delta else ""
    print_info(f"wrote {done.records} records to {output}; guarantee: epsilon={g.epsilon:.4g}{dl} per "
               f"{g.unit}{tok}; each record states the adjacency and what is not covered")


def _own_params(cls: type[LMRewriter], opts: LMOptions, batch_size: int) -> dict[str, object]:
    """The options the rewriter ``cls`` takes (its dataclass fields); dp-prompt's prompt options are refused by the
    others (an ignored prompt would mislead)."""
    prompt = _prompt(opts)
    own = cls.param_names()
    if "prompt" not in own:
        for flag, given in (("--prompt/--prompt-file", prompt is not None), ("--prior", opts.prior),
                            ("--public-top-k", opts.public_top_k is not None),
                            ("--prompt-format", opts.prompt_format != "auto")):
            if given:
                raise ParameterError(f"{flag} applies to dp-prompt, not to {cls.name}")
    options = {"max_tokens": opts.max_tokens, "max_new_tokens": opts.max_new_tokens,
               "max_input_tokens": opts.max_input_tokens, "copy_stopwords": opts.copy_stopwords,
               "batch_size": batch_size, "top_k": opts.top_k, "top_p": opts.top_p, "delta": opts.delta,
               "prompt": prompt, "prompt_format": opts.prompt_format, "prior": opts.prior,
               "public_top_k": opts.public_top_k, "batch_tokens": opts.batch_tokens}
    return {k: v for k, v in options.items() if k in own}


#: The options of the language-model rewriters, as ``typer.Option`` objects for :mod:`textdp.cli.rewrite`.
LM_HELP: dict[str, OptionInfo] = {
    "clip": typer.Option(metavar="LOW,HIGH", help="dp-*: public clipping bounds (logits; dp-bart: encoder output, "
                         "e.g. -0.2,0.1). Or --clip-public."),
    "clip_public": typer.Option(help="dp-*: PUBLIC text (one text per line, or JSONL); the bounds come from the "
                                "model's values on it (--clip-rule, --clip-quantiles). Never the private input (an input, a copy of "
                                "one, or a file holding an input document is refused)."),
    "clip_quantiles": typer.Option(metavar="LOW,HIGH", help="With --clip-public: the quantiles of the bounds."),
    "clip_rule": typer.Option(help="With --clip-public: step-max (upper bound from each public position's largest "
                              "logit: keeps the model's choice), all-values (quantiles of every logit), auto "
                              "(step-max; all-values for dp-bart)."),
    "prompt": typer.Option(help="dp-prompt: the prompt text, with {document} where the text goes (public, "
                           "recorded). Default: an instruction in the model's chat template, or the paper's."),
    "prompt_file": typer.Option(help="dp-prompt: read the prompt text (with {document}) from this file."),
    "prompt_format": typer.Option(help="dp-prompt: chat (the tokenizer's chat template around the prompt), plain "
                                  "(the text as it is, with the model's BOS), auto (chat when the model has a "
                                  "template). Recorded."),
    "prior": typer.Option("--prior/--no-prior", help="dp-prompt: clip the difference to the public prior (the "
                          "logits without the document; InvisibleInk); --clip is then that difference's range."),
    "public_top_k": typer.Option(help="dp-prompt with --prior: draw from the public top-k+ set (tokens whose "
                                 "prior logit is within the clip range of the k-th largest; free)."),
    "batch_tokens": typer.Option(help="dp-prompt: most rows x (prompt + new tokens) per batch (bounds memory)."),
    "delta": typer.Option(help="dp-bart: delta per sentence."),
    "max_new_tokens": typer.Option(help="dp-prompt, dp-paraphrase: most tokens generated per unit; each step costs "
                                   "epsilon, so a unit costs max-new-tokens x epsilon (64: ordinary sentences are "
                                   "not cut); dp-bart: decoding length."),
    "max_tokens": typer.Option(help="dp-paraphrase, dp-mlm, dp-bart: input tokens per sentence (longer are cut)."),
    "max_input_tokens": typer.Option(help="dp-prompt: document tokens put in the prompt (longer documents are cut; "
                                     "the cut is public, stated in the guarantee)."),
    "copy_stopwords": typer.Option("--copy-stopwords/--replace-stopwords", help="dp-mlm: copy stop words and "
                                   "punctuation (the paper; they are then released) or replace every token."),
    "top_k": typer.Option(help="Refused: top-k keeps tokens chosen from private logits (no finite epsilon)."),
    "top_p": typer.Option(help="Refused: top-p keeps tokens chosen from private logits (no finite epsilon)."),
    "ledger": typer.Option(help="PRIVATE ledger file: every release is recorded per document id (0600; never "
                           "publish it beside the output). See `textdp ledger show`."),
    "budget": typer.Option(help="With --ledger: refuse a release that would take a document past this epsilon "
                           "(summed across runs)."),
    "delta_budget": typer.Option(help="With --budget: the total delta a document may spend (composed across runs; "
                                 "default 1e-3, that is 100 releases at delta=1e-5)."),
    "new_ledger": typer.Option(help="With --ledger: accept the ledger as it is now (or start an empty one if it is "
                               "gone) when it no longer matches what textdp last wrote; the spend it lost is "
                               "forgotten. See `textdp ledger reset`."),
}
