"""Audit cases of ER-AE (``er-ae``) and AE-DP (``ae-dp``) on their own release path, their laws derived again.

:func:`er_ae_case` and :func:`ae_dp_case` build the mechanism with :func:`textdp.mechanisms.get` and
fit it on a **tiny trained textdp model** that this module writes to a private temporary folder
(:func:`tiny_model`: random 8-d embeddings of :data:`ER_AE_WORDS` from :func:`textdp._rng.make_rng`,
trained by :func:`textdp.generation.training.train_rewriter` on public two-word sentences written
here, with the objective the mechanism requires: ``er-ae`` for ER-AE, ``reconstruction`` for AE-DP;
nothing is read from a corpus or downloaded). It samples
:meth:`~textdp.mechanisms.base.Mechanism.privatize_batch` on two neighbouring one-segment texts and
reads the released text back as a token sequence of at most ``L_max`` words
(:data:`ER_AE_MAX_LENGTH`), indexed over every sequence the vocabulary allows.

Nothing here calls the mechanism's calibration or sampling code. The claim is ``L_max`` times the
per-token bound re-derived by :func:`textdp.audit.accountant.two_set_per_token` (never read from
``two_set_bound``); the reference law (:func:`sequence_law`) runs the model's network again
(encoder, then the generator step by step, autoregressive, the end token among the candidates) and
computes each step's two-set law exactly (:func:`two_set_step_law`: every lexical multiset of ``k``
draws enumerated, er-ae-notes.md's steps 1-5 with textdp's weights ``e^{ε u/2}``). AE-DP's claim is
``L_max`` times :func:`textdp.audit.accountant.exponential_per_token` (never ``em_bound``), its step law
:func:`em_step_law` (one exponential mechanism ``∝ e^{ε p_w/2}`` over the allowed tokens, written
again here, never ``em_distribution``). Each case carries

* the **event test** on the released sequences against the claim;
* the **privacy curve** with the exact loss ``ln p_a(o)/p_b(o)`` of the reference law: a loop that
  samples a sharper law than it claims (ε×3 inside the step) moves it although the loose claim,
  dominated by ``ln |V|``, still holds for this pair;
* the **conformance test** (χ² of the released sequences against the reference table).

:func:`textdp.audit.power.two_set_toy_case` keeps the earlier one-step toy (point masses on words 0 and 1 of a toy
alphabet, drawn by the mechanism's ``two_set_step`` directly): a power study of the step alone,
never registered behind ``textdp audit``. :func:`two_set_point_mass_law` is its law, derived in closed
form, and a check of :func:`two_set_step_law` on point masses. Needs the ``[generation]`` extra (torch).

References
----------
H. Bo, S. H. H. Ding, B. C. M. Fung, F. Iqbal. ER-AE: differentially private text generation for
authorship anonymization. NAACL 2021 (poster; /work/shared/reference/er-ae-notes.md; AE-DP is its
baseline: the auto-encoder trained on reconstruction, one exponential mechanism per step). F. McSherry,
K. Talwar. Mechanism design via differential privacy. FOCS 2007 (Theorem 6).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._options import VARIANTS
from .._rng import make_rng
from ..errors import ParameterError, require
from .accountant import exponential_per_token, two_set_per_token
from .conformance import Conformance
from .core import AuditCase
from .curve import CURVE_POINTS, PrivacyCurve, exact_profile

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "AE_DP_DEFAULT_EPSILON",
    "ER_AE_DEFAULT_EPSILON",
    "ER_AE_MAX_LENGTH",
    "ER_AE_WORDS",
    "ae_dp_case",
    "em_step_law",
    "er_ae_case",
    "one_torch_thread",
    "sequence_law",
    "tiny_er_ae_model",
    "tiny_model",
    "two_set_point_mass_law",
    "two_set_step_law",
]

#: Nominal per-token ε of the default audit (the claim is ``L_max`` times the two-set bound at this ε): the
#: authors' code's default, 5 (at 2 the set choice is too flat for the tiny model to show ε×1.5 in 10^4 samples).
ER_AE_DEFAULT_EPSILON = 5.0
#: Public words of the tiny ER-AE model (subjects, then verbs); its training text is every subject-verb pair.
ER_AE_WORDS = ("cat", "dog", "bird", "fox", "sat", "ran", "slept", "hid")
#: ``L_max`` of the tiny model: tokens per segment and generation steps per sentence.
ER_AE_MAX_LENGTH = 2
#: Candidate neighbouring texts (one segment each); the pair whose reference laws differ most is audited.
ER_AE_TEXTS = ("cat sat", "dog ran", "bird slept", "fox hid")
#: Training epochs of the tiny model (16 sentences, batches of 8).
ER_AE_EPOCHS = 30
#: Default samples per input (10^4 releases take about a second).
ER_AE_SAMPLES = 10_000
#: Nominal per-step ε of the default AE-DP audit (claim ``L_max`` ε = 10): at 5 the tiny model's law
#: ``∝ e^{ε p/2}`` moves with the input enough for ε×1.5 inside the step to show in 10^4 samples.
AE_DP_DEFAULT_EPSILON = 5.0

_BUILT: dict[tuple[int, str], Path] = {}
_TMP: list[str] = []


@atexit.register
def _remove_tiny_models() -> None:
    for folder in _TMP:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block on one torch thread (restored after): tiny networks on a shared machine.

    torch's intra-op threads spin-wait: on the project's shared 2-core machine at load ~8 the tiny
    model's 60 training steps took 42 s on torch's default 2 threads and 2.2 s on one (one run each).
    """
    torch = require("torch", "generation")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def tiny_model(*, seed: int = 0, objective: str = "er-ae") -> Path:
    """The folder of a tiny textdp model trained here (once per process and objective; private, removed at exit).

    Embeddings: ``make_rng(seed)`` normal 8-d vectors of :data:`ER_AE_WORDS`; training: every
    subject-verb sentence of the words (public, written here), ``L_max`` = :data:`ER_AE_MAX_LENGTH`,
    8 hidden units, :data:`ER_AE_EPOCHS` epochs, training seed ``seed``, the training ``objective``
    (``er-ae``: ER-AE's warm-up then embedding reward; ``reconstruction``: AE-DP's model), declared
    public (the guarantee then covers the rewriting step). About 2 s on one thread; torch's global
    generator and thread count are left as they were.
    """
    key = (int(seed), str(objective))
    if key in _BUILT:
        return _BUILT[key]
    torch = require("torch", "generation")
    from ..embeddings import Embeddings
    from ..generation.training import TrainingSettings, train_rewriter
    from ..generation.vocab import segment_text

    words = list(ER_AE_WORDS)
    emb = Embeddings(words, make_rng(seed).normal(0.0, 1.0, (len(words), 8)), name="audit-random-8d")
    subjects, verbs = words[:4], words[4:]
    text = " ".join(f"{a} {v}" for a in subjects for v in verbs)
    settings = TrainingSettings(seed=int(seed) + 5, vocab_size=len(words), encoder_hidden=8, latent=8,
                                decoder_hidden=8, max_length=ER_AE_MAX_LENGTH, batch_size=8, epochs=ER_AE_EPOCHS,
                                objective=objective)
    tmp = tempfile.mkdtemp(prefix="textdp-audit-tiny-")  # mode 0700, removed at exit
    _TMP.append(tmp)
    out = Path(tmp) / objective
    with torch.random.fork_rng(devices=[]), one_torch_thread():  # torch's global generator is left as it was
        train_rewriter(segment_text(text, ER_AE_MAX_LENGTH), out, emb, settings, data_description="audit: public "
                       "subject-verb pairs of a toy word list", declared_public=True)
    _BUILT[key] = out
    return out


def tiny_er_ae_model(*, seed: int = 0) -> Path:
    """:func:`tiny_model` trained on ER-AE's objective (the ``er-ae`` case's model)."""
    return tiny_model(seed=seed, objective="er-ae")


def two_set_step_law(p: np.ndarray, allowed: np.ndarray, epsilon: float, *, word_fraction: float = 0.1,
                     k: int = 5) -> np.ndarray:
    """The output probabilities of one two-set step on the model's distribution ``p`` (derived again, float64).

    er-ae-notes.md's steps with textdp's weights: the lexical multiset ``L`` (``k`` i.i.d. draws from
    ``p``; every multiset enumerated with its multinomial probability), ``S`` = the allowed words
    outside ``L``; ``u_L`` = the duplicate-counted mass of ``L`` over itself plus the mass of ``S``;
    ``L`` chosen with probability ``1/(1 + e^{−ε_set (u_L − 1/2)})``, ``ε_set = (1 − f) ε``; inside
    ``L`` entry ``j`` with weight ``e^{ε_word p/2}`` (duplicates kept), inside ``S`` word ``w`` with
    weight ``e^{ε_word p_w/2}``, ``ε_word = f ε``; an empty ``S`` falls back to ``L``.

    On a point mass it is :func:`two_set_point_mass_law`'s row:

    >>> p = np.zeros(50); p[0] = 1.0
    >>> bool(np.allclose(two_set_step_law(p, np.ones(50, bool), 2.0), two_set_point_mass_law(2.0, 50)[0]))
    True
    """
    p = np.asarray(p, dtype=np.float64)
    allowed = np.asarray(allowed, dtype=bool)
    idx = np.flatnonzero(p > 0)
    combos = np.array(list(itertools.combinations_with_replacement(range(len(idx)), int(k))), dtype=np.int64)
    counts = np.zeros((len(combos), len(idx)))
    np.add.at(counts, (np.repeat(np.arange(len(combos)), int(k)), combos.ravel()), 1.0)
    lgam = np.vectorize(math.lgamma)
    log_mult = math.lgamma(int(k) + 1) - lgam(counts + 1.0).sum(1)
    prob_l = np.exp(log_mult + counts @ np.log(p[idx]))
    e_word = float(word_fraction) * float(epsilon)
    e_set, b = float(epsilon) - e_word, e_word / 2.0
    mass_multi = counts @ p[idx]
    mass_s = np.maximum(p.sum() - (counts > 0) @ p[idx], 0.0)
    u_l = mass_multi / (mass_multi + mass_s)
    choose_l = 1.0 / (1.0 + np.exp(-e_set * (u_l - 0.5)))
    w_l = counts * np.exp(b * p[idx])
    in_l = np.zeros((len(combos), len(p)))
    in_l[:, idx] = w_l / w_l.sum(1, keepdims=True)
    s_mask = np.broadcast_to(allowed, in_l.shape).copy()
    s_mask[:, idx] &= counts == 0
    w_s = np.where(s_mask, np.exp(b * p)[None, :], 0.0)
    tot_s = w_s.sum(1, keepdims=True)
    empty = tot_s[:, 0] == 0
    choose_l = np.where(empty, 1.0, choose_l)
    in_s = np.divide(w_s, tot_s, out=np.zeros_like(w_s), where=tot_s > 0)
    law = prob_l @ (choose_l[:, None] * in_l + (1.0 - choose_l)[:, None] * in_s)
    return np.asarray(law / law.sum())


def em_step_law(p: np.ndarray, allowed: np.ndarray, epsilon: float) -> np.ndarray:
    """The output probabilities of one AE-DP step on the model's distribution ``p`` (derived again, float64).

    One exponential mechanism over the allowed tokens with utility ``p_w ∈ [0, 1]`` (sensitivity 1)
    and weights ``e^{ε p_w/2}`` (McSherry & Talwar 2007): ``softmax(ε p/2)`` over ``allowed``, 0 elsewhere.

    >>> em_step_law(np.array([0.0, 1.0, 0.0]), np.array([False, True, True]), 2.0).round(4).tolist()
    [0.0, 0.7311, 0.2689]
    """
    pp = np.asarray(p, dtype=np.float64)
    ok = np.asarray(allowed, dtype=bool)
    score = np.where(ok, 0.5 * float(epsilon) * pp, -np.inf)
    w = np.exp(score - score[ok].max())
    return np.asarray(w / w.sum())


#: ``step_law(p, allowed, epsilon) -> probabilities``: one step's law on the model's distribution ``p``.
StepLaw = Callable[[np.ndarray, np.ndarray, float], np.ndarray]


def sequence_law(model_dir: str | Path, text: str, epsilon: float, *, step_law: StepLaw | None = None,
                 teacher_forced: bool = False) -> tuple[np.ndarray, dict[tuple[str, ...], int], list[str]]:
    """``(log_law, index, words)``: the reference law of the released sequences for the one-segment ``text``.

    The model (a public function) is run here: the text's token ids through the encoder, then the
    generator from ``<start>``, each step's logits with pad, start and unk banned, softmax in float64,
    the step's law from ``step_law`` (default :func:`two_set_step_law`, ER-AE's; :func:`em_step_law`
    for AE-DP); autoregressive (the drawn token is the next input), at most ``L_max`` steps, the end
    token ending the sequence (not released). ``teacher_forced`` (the ``teacher-forced`` variant): after
    step ``t`` the next input is the text's token ``t`` while the text has one, else the drawn token.
    ``index`` maps each sequence of words (length 0 to ``L_max``) to its position in ``log_law``.
    """
    law_of: StepLaw = two_set_step_law if step_law is None else step_law
    torch = require("torch", "generation")
    from ..generation.rewriter import Rewriter

    with torch.random.fork_rng(devices=[]):  # building the network initialises it from torch's global generator
        rw = Rewriter(model_dir)
    vocab, net, n_max = rw.vocab, rw.net, rw.max_length
    tokens = list(vocab.tokens)
    end = tokens.index("<end>")
    start = tokens.index("<start>")
    allowed = vocab.output_mask()
    word_ids = [i for i in range(len(tokens)) if allowed[i] and i != end]
    words = [tokens[i] for i in word_ids]
    seqs = [s for n in range(n_max + 1) for s in itertools.product(range(len(word_ids)), repeat=n)]
    index = {tuple(words[j] for j in s): i for i, s in enumerate(seqs)}
    law = np.zeros(len(seqs))
    ids = torch.from_numpy(vocab.encode(text.split()))[None, :]
    with torch.no_grad():
        table = net.table()
        z = net.encode(ids, torch.tensor([ids.shape[1]]))

        def walk(prefix: tuple[int, ...], prob: float, prev: int, h: Tensor) -> None:
            if len(prefix) == n_max:
                law[index[tuple(words[j] for j in prefix)]] += prob
                return
            logits, h2 = net.step(z, torch.tensor([prev]), h, table)
            lg = logits[0].double().numpy()
            lg = np.where(allowed, lg, -np.inf)
            p = np.exp(lg - lg.max())
            step = law_of(p / p.sum(), allowed, float(epsilon))
            law[index[tuple(words[j] for j in prefix)]] += prob * step[end]
            t = len(prefix)
            forced = int(ids[0, t]) if teacher_forced and t < ids.shape[1] else None
            for j, w in enumerate(word_ids):
                walk((*prefix, j), prob * step[w], w if forced is None else forced, h2)

        walk((), 1.0, start, net.initial_state(z))
    with np.errstate(divide="ignore"):
        return np.log(law), index, words


def _release_path_case(name: str, folder: Path, eps: float, step_law: StepLaw, per_token: float, law: str,
                       **params: object) -> AuditCase:
    """The audit case of the textdp-model mechanism ``name`` at ``eps`` through ``privatize_batch`` (module docstring).

    ``step_law``: the reference law of one step; ``per_token``: the audit accountant's bound per
    generation step (the claim is ``L_max`` times it); ``law``: the conformance test's description;
    ``params``: the mechanism's other public parameters.
    """
    from ..mechanisms import get

    mech = get(name, epsilon=eps, model=str(folder), batch_size=1 << 20, **params).fit()
    teacher = params.get("variant") == "teacher-forced"
    laws = {t: sequence_law(folder, t, eps, step_law=step_law, teacher_forced=teacher) for t in ER_AE_TEXTS}
    index, words = laws[ER_AE_TEXTS[0]][1], laws[ER_AE_TEXTS[0]][2]
    size = len(index)

    def divergence(pair: tuple[str, str]) -> float:
        x, y = laws[pair[0]][0], laws[pair[1]][0]
        return float(((np.exp(x) - np.exp(y)) * (x - y)).sum())

    text_a, text_b = max(itertools.combinations(ER_AE_TEXTS, 2), key=divergence)
    la, lb = laws[text_a][0], laws[text_b][0]
    # the claim: L_max steps, each at most the audit accountant's per-step bound (never the mechanism's own)
    claimed = ER_AE_MAX_LENGTH * per_token

    def sample(which: object, n: int, rng: np.random.Generator) -> np.ndarray:
        with one_torch_thread():
            released = mech.privatize_batch([str(which)] * n, seed=rng)
        return np.array([index.get(tuple(str(r.content).split()), size) for r in released], dtype=np.int64)

    with np.errstate(invalid="ignore"):
        diff = np.where(np.isfinite(la) & np.isfinite(lb), la - lb, 0.0)
    loss_of = np.append(diff, 0.0)  # "outside the support": loss 0 (the conformance test rejects it)
    top = float(np.abs(diff).max())
    curve = PrivacyCurve(sample=sample, loss=lambda ids: loss_of[np.asarray(ids, dtype=np.int64)],
                         claimed=exact_profile(la, lb), grid=tuple(np.linspace(0.0, top, CURVE_POINTS, endpoint=False)),
                         description=f"the exact loss of the reference law over {size} sequences", chunk=ER_AE_SAMPLES,
                         reuse_outputs=True)
    probs = {text_a: np.append(np.exp(la), 0.0), text_b: np.append(np.exp(lb), 0.0)}
    conf = Conformance(description=f"{name}: {law} on the model's distribution, recomputed from the model, up to "
                                   f"{ER_AE_MAX_LENGTH} autoregressive steps",
                       kind="table", keep=lambda which, out: out, table=lambda which: probs[str(which)])
    pair = (f"{name} on a tiny textdp model trained here ({len(words)} words, L_max {ER_AE_MAX_LENGTH}), released "
            f"through privatize_batch: {text_a!r} vs {text_b!r}" + ("; variant teacher-forced" if teacher else ""))
    return AuditCase(mechanism=name, pair=pair, input_a=text_a, input_b=text_b, sample=sample,
                     claimed_epsilon=claimed, claimed_delta=0.0, events="discrete", chunk=ER_AE_SAMPLES, curve=curve,
                     conformance=conf, default_samples=ER_AE_SAMPLES)


#: The largest ``k`` (draws of the lexical multiset) the audit takes: its step law enumerates every multiset.
ER_AE_MAX_K = 8


def _variant(value: str | None) -> dict[str, object]:
    """``{"variant": value}`` when given (checked against the mechanisms' variants), else ``{}``."""
    if value is None:
        return {}
    if value not in VARIANTS:
        raise ParameterError(f"variant must be one of {', '.join(VARIANTS)}, got {value!r}")
    return {"variant": value}


def er_ae_case(epsilon: float | None = None, delta: float | None = None, *, seed: int = 0,
               word_fraction: float | str | None = None, k: int | str | None = None,
               variant: str | None = None) -> AuditCase:
    """The ``er-ae`` audit case on its release path (module docstring).

    ``epsilon``: the nominal per-token ε (``None``: :data:`ER_AE_DEFAULT_EPSILON`); ``delta`` is ignored
    (the two-set mechanism is pure ε-DP); ``seed``: the tiny model's embeddings and training (public).
    ``word_fraction`` (in (0, 1); default 0.1) and ``k`` (1 to :data:`ER_AE_MAX_K`; default 5): the
    mechanism's split of ε and its lexical multiset's draws (``--param``), given to the mechanism, the claim
    and the reference law alike; ``variant`` (``teacher-forced``: :func:`sequence_law` feeds the text's tokens;
    the claim is the same, each step still one draw of the per-token bound). The claim is ``L_max`` times :func:`~textdp.audit.accountant.two_set_per_token`
    over the output alphabet (the words and the end token), never read from ``two_set_bound``.
    """
    require("torch", "generation")
    eps = ER_AE_DEFAULT_EPSILON if epsilon is None else float(epsilon)
    params = _variant(variant)
    f, draws = 0.1, 5
    if word_fraction is not None:
        try:
            f = float(word_fraction)
        except ValueError:
            raise ParameterError(f"word_fraction must be a number in (0, 1), got {word_fraction!r}") from None
        if not 0.0 < f < 1.0:
            raise ParameterError(f"word_fraction must be a number in (0, 1), got {word_fraction!r}")
        params["word_fraction"] = f
    if k is not None:
        try:
            draws = int(str(k).strip())
        except ValueError:
            raise ParameterError(f"k must be a whole number from 1 to {ER_AE_MAX_K}, got {k!r}") from None
        if not 1 <= draws <= ER_AE_MAX_K:
            raise ParameterError(f"the audit takes k from 1 to {ER_AE_MAX_K} (its step law lists every multiset of "
                                 f"k draws), got {k!r}")
        params["k"] = draws
    step = functools.partial(two_set_step_law, word_fraction=f, k=draws)
    return _release_path_case("er-ae", tiny_model(seed=seed, objective="er-ae"), eps, step,
                              two_set_per_token(eps, len(ER_AE_WORDS) + 1, word_fraction=f, k=draws),
                              f"two-set exponential mechanism (er-ae-notes.md, k = {draws}, eps_set = {1 - f:g} eps, "
                              f"eps_word = {f:g} eps)", **params)


def ae_dp_case(epsilon: float | None = None, delta: float | None = None, *, seed: int = 0,
               variant: str | None = None) -> AuditCase:
    """The ``ae-dp`` audit case on its release path (module docstring): a tiny model trained on reconstruction.

    ``epsilon``: the per-step ε (``None``: :data:`AE_DP_DEFAULT_EPSILON`); ``delta`` is ignored (pure
    ε-DP); ``seed``: the tiny model's embeddings and training (public). The claim is ``L_max`` times
    :func:`~textdp.audit.accountant.exponential_per_token` (log-weights ``ε p/2``, scores of range 1),
    never read from ``em_bound``; the reference law's step is :func:`em_step_law`.
    """
    require("torch", "generation")
    eps = AE_DP_DEFAULT_EPSILON if epsilon is None else float(epsilon)
    return _release_path_case("ae-dp", tiny_model(seed=seed, objective="reconstruction"), eps, em_step_law,
                              exponential_per_token(eps / 2.0, 1.0),
                              "one exponential mechanism over the allowed tokens, P(w) ~ exp(eps p_w / 2)",
                              **_variant(variant))


def two_set_point_mass_law(epsilon: float, vocab_size: int, *, word_fraction: float = 0.1) -> np.ndarray:
    """The two-set law's output probabilities on the point masses ``δ_0`` (row 0) and ``δ_1`` (row 1), derived again.

    With all the mass on word ``j`` the lexical multiset is ``k`` copies of ``j`` (utility 1) and the other set
    is every other word (utility 0, each with probability 0, so the draw inside it is uniform); the set is
    chosen with weights ``e^{ε_set u/2}``, ``ε_set = (1 − f) ε`` (er-ae-notes.md, steps 1-5):
    ``P(j) = 1/(1 + e^{−ε_set/2})`` and ``P(w) = (1 − P(j))/(|V| − 1)`` for ``w != j``.

    The loss of word 0, ``ε_set/2 + ln(|V| − 1)``, sits just under the per-token bound (4.794 at ε = 2):

    >>> p = two_set_point_mass_law(2.0, 50)
    >>> round(float(p[0, 0]), 4), round(float(np.log(p[0, 0] / p[1, 0])), 3)
    (0.7109, 4.792)
    """
    e_set = (1.0 - float(word_fraction)) * float(epsilon)
    keep = 1.0 / (1.0 + math.exp(-e_set / 2.0))
    law = np.full((2, int(vocab_size)), (1.0 - keep) / (int(vocab_size) - 1))
    law[0, 0] = law[1, 1] = keep
    return law
