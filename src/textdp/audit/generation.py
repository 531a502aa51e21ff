"""Audit case of ER-AE (``er-ae``) on its own release path, and its reference law derived again.

:func:`er_ae_case` builds the mechanism with :func:`textdp.mechanisms.get` and fits it on a **tiny
trained textdp model** that this module writes to a private temporary folder (:func:`tiny_er_ae_model`:
random 8-d embeddings of :data:`ER_AE_WORDS` from :func:`textdp._rng.make_rng`, trained by
:func:`textdp.generation.training.train_rewriter` on public two-word sentences written here; nothing is
read from a corpus or downloaded). It samples :meth:`~textdp.mechanisms.base.Mechanism.privatize_batch`
on two neighbouring one-segment texts and reads the released text back as a token sequence of at
most ``L_max`` words (:data:`ER_AE_MAX_LENGTH`), indexed over every sequence the vocabulary allows.

Nothing here calls the mechanism's calibration or sampling code. The claim is ``L_max`` times the
per-token bound re-derived by :func:`textdp.audit.accountant.two_set_per_token` (never read from
``two_set_bound``); the reference law (:func:`sequence_law`) runs the model's network again
(encoder, then the generator step by step, autoregressive, the end token among the candidates) and
computes each step's two-set law exactly (:func:`two_set_step_law`: every lexical multiset of ``k``
draws enumerated, er-ae-notes.md's steps 1-5 with textdp's weights ``e^{ε u/2}``). The case carries

* the **event test** on the released sequences against the claim;
* the **privacy curve** with the exact loss ``ln p_a(o)/p_b(o)`` of the reference law: a loop that
  samples a sharper law than it claims (ε×3 inside the step) moves it although the loose claim,
  dominated by ``ln |V|``, still holds for this pair;
* the **conformance test** (χ² of the released sequences against the reference table).

:func:`two_set_toy_case` keeps the earlier one-step toy (point masses on words 0 and 1 of a toy
alphabet, drawn by the mechanism's ``two_set_step`` directly): a power study of the step alone,
never registered behind ``textdp audit``. :func:`two_set_point_mass_law` is its law, derived in closed
form, and a check of :func:`two_set_step_law` on point masses. Needs the ``[generation]`` extra (torch).

References
----------
H. Bo, S. H. H. Ding, B. C. M. Fung, F. Iqbal. ER-AE: differentially private text generation for
authorship anonymization. NAACL 2021 (poster; /work/shared/reference/er-ae-notes.md). F. McSherry,
K. Talwar. Mechanism design via differential privacy. FOCS 2007.
"""

from __future__ import annotations

import atexit
import itertools
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .._rng import make_rng
from ..errors import require
from .accountant import two_set_per_token
from .conformance import Conformance
from .core import AuditCase
from .curve import CURVE_POINTS, PrivacyCurve, exact_profile

__all__ = [
    "ER_AE_DEFAULT_EPSILON",
    "ER_AE_MAX_LENGTH",
    "ER_AE_WORDS",
    "er_ae_case",
    "sequence_law",
    "tiny_er_ae_model",
    "two_set_point_mass_law",
    "two_set_step_law",
    "two_set_toy_case",
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

_BUILT: dict[int, Path] = {}
_TMP: list[str] = []


@atexit.register
def _remove_tiny_models() -> None:
    for folder in _TMP:
        shutil.rmtree(folder, ignore_errors=True)


def tiny_er_ae_model(*, seed: int = 0) -> Path:
    """The folder of a tiny ER-AE model trained here (once per process; a private temporary folder removed at exit).

    Embeddings: ``make_rng(seed)`` normal 8-d vectors of :data:`ER_AE_WORDS`; training: every
    subject-verb sentence of the words (public, written here), ``L_max`` = :data:`ER_AE_MAX_LENGTH`,
    8 hidden units, :data:`ER_AE_EPOCHS` epochs, training seed ``seed``, declared public (the guarantee then covers the
    rewriting step). A few seconds on one core; torch's global generator is left as it was.
    """
    if seed in _BUILT:
        return _BUILT[seed]
    torch = require("torch", "generation")
    from ..embeddings import Embeddings
    from ..generation.training import TrainingSettings, train_rewriter
    from ..generation.vocab import segment_text

    words = list(ER_AE_WORDS)
    emb = Embeddings(words, make_rng(seed).normal(0.0, 1.0, (len(words), 8)), name="audit-random-8d")
    subjects, verbs = words[:4], words[4:]
    text = " ".join(f"{a} {v}" for a in subjects for v in verbs)
    settings = TrainingSettings(seed=int(seed) + 5, vocab_size=len(words), encoder_hidden=8, latent=8,
                                decoder_hidden=8, max_length=ER_AE_MAX_LENGTH, batch_size=8, epochs=ER_AE_EPOCHS)
    tmp = tempfile.mkdtemp(prefix="textdp-audit-er-ae-")  # mode 0700, removed at exit
    _TMP.append(tmp)
    out = Path(tmp) / "er-ae"
    with torch.random.fork_rng(devices=[]):  # torch's global generator is left as it was
        train_rewriter(segment_text(text, ER_AE_MAX_LENGTH), out, emb, settings, data_description="audit: public "
                       "subject-verb pairs of a toy word list", declared_public=True)
    _BUILT[seed] = out
    return out


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


def sequence_law(model_dir: str | Path, text: str, epsilon: float, *, word_fraction: float = 0.1,
                 k: int = 5) -> tuple[np.ndarray, dict[tuple[str, ...], int], list[str]]:
    """``(log_law, index, words)``: the reference law of ER-AE's released sequences for the one-segment ``text``.

    The model (a public function) is run here: the text's token ids through the encoder, then the
    generator from ``<start>``, each step's logits with pad, start and unk banned, softmax in float64,
    the step's law from :func:`two_set_step_law`; autoregressive (the drawn token is the next input),
    at most ``L_max`` steps, the end token ending the sequence (not released). ``index`` maps each
    sequence of words (length 0 to ``L_max``) to its position in ``log_law``.
    """
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

        def walk(prefix: tuple[int, ...], prob: float, prev: int, h: Any) -> None:
            if len(prefix) == n_max:
                law[index[tuple(words[j] for j in prefix)]] += prob
                return
            logits, h2 = net.step(z, torch.tensor([prev]), h, table)
            lg = logits[0].double().numpy()
            lg = np.where(allowed, lg, -np.inf)
            p = np.exp(lg - lg.max())
            step = two_set_step_law(p / p.sum(), allowed, epsilon, word_fraction=word_fraction, k=k)
            law[index[tuple(words[j] for j in prefix)]] += prob * step[end]
            for j, w in enumerate(word_ids):
                walk((*prefix, j), prob * step[w], w, h2)

        walk((), 1.0, start, net.initial_state(z))
    with np.errstate(divide="ignore"):
        return np.log(law), index, words


def er_ae_case(epsilon: float | None = None, delta: float | None = None, *, seed: int = 0) -> AuditCase:
    """The ``er-ae`` audit case on its release path (module docstring).

    ``epsilon``: the nominal per-token ε (``None``: :data:`ER_AE_DEFAULT_EPSILON`); ``delta`` is ignored
    (the two-set mechanism is pure ε-DP); ``seed``: the tiny model's embeddings and training (public).
    """
    require("torch", "generation")
    from ..mechanisms import get

    eps = ER_AE_DEFAULT_EPSILON if epsilon is None else float(epsilon)
    folder = tiny_er_ae_model(seed=seed)
    mech = get("er-ae", epsilon=eps, model=str(folder), batch_size=1 << 20).fit()
    laws = {t: sequence_law(folder, t, eps) for t in ER_AE_TEXTS}
    index, words = laws[ER_AE_TEXTS[0]][1], laws[ER_AE_TEXTS[0]][2]
    size = len(index)

    def divergence(pair: tuple[str, str]) -> float:
        x, y = laws[pair[0]][0], laws[pair[1]][0]
        return float(((np.exp(x) - np.exp(y)) * (x - y)).sum())

    text_a, text_b = max(itertools.combinations(ER_AE_TEXTS, 2), key=divergence)
    la, lb = laws[text_a][0], laws[text_b][0]
    # the claim: L_max steps, each at most the per-token bound re-derived by the audit's accountant over the
    # output alphabet (the words and the end token), never read from two_set_bound
    claimed = ER_AE_MAX_LENGTH * two_set_per_token(eps, len(words) + 1)

    def sample(which: Any, n: int, rng: np.random.Generator) -> np.ndarray:
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
    conf = Conformance(description=f"er-ae: two-set exponential mechanism (er-ae-notes.md, k = 5, eps_set = 0.9 eps, "
                                   f"eps_word = 0.1 eps) on the model's distribution, recomputed from the model, "
                                   f"up to {ER_AE_MAX_LENGTH} autoregressive steps",
                       kind="table", keep=lambda which, out: out, table=lambda which: probs[str(which)])
    pair = (f"er-ae on a tiny textdp model trained here ({len(words)} words, L_max {ER_AE_MAX_LENGTH}), released "
            f"through privatize_batch: {text_a!r} vs {text_b!r}")
    return AuditCase(mechanism="er-ae", pair=pair, input_a=text_a, input_b=text_b, sample=sample,
                     claimed_epsilon=claimed, claimed_delta=0.0, events="discrete", chunk=ER_AE_SAMPLES, curve=curve,
                     conformance=conf, default_samples=ER_AE_SAMPLES)


def two_set_toy_case(epsilon: float | None = None, delta: float | None = None, *, broken: str | None = None,
                     vocab_size: int = 50) -> AuditCase:
    """One step of the two-set mechanism on point masses (a power study of the step; never registered).

    The samplers come from :func:`textdp.generation.audit.two_set_audit_case` (point masses on words
    0 and 1 of a toy alphabet, drawn by the mechanism's own ``two_set_step``); the claim is
    :func:`~textdp.audit.accountant.two_set_per_token`; ``broken``: a deliberately wrong variant.
    ``delta`` is ignored.
    """
    require("torch", "generation")
    from ..generation.audit import two_set_audit_case

    eps = 2.0 if epsilon is None else epsilon
    sample_a, sample_b, stated, claimed_delta = two_set_audit_case(eps, vocab_size=vocab_size, broken=broken)
    # the poster-claim variant keeps its deliberately wrong claim
    claimed = stated if broken == "poster-claim" else two_set_per_token(float(eps), vocab_size)

    def sample(which: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_a(n, rng) if which == "a" else sample_b(n, rng)

    table = two_set_point_mass_law(float(eps), vocab_size)
    conf = Conformance(description=f"two-set exponential mechanism on a point mass (er-ae-notes.md): the lexical "
                                   f"set chosen with probability 1/(1 + e^(-eps_set/2)), eps_set = 0.9 eps, else a "
                                   f"uniform word of the other {vocab_size - 1}",
                       kind="table", keep=lambda which, out: out, table=lambda which: table[0 if which == "a" else 1])
    la, lb = np.log(table[0]), np.log(table[1])
    curve = PrivacyCurve(sample=sample, loss=lambda out: (la - lb)[np.asarray(out, dtype=np.int64)],
                         claimed=exact_profile(la, lb), grid=tuple(np.linspace(0.0, 0.75 * claimed, CURVE_POINTS)),
                         description="the exact loss of the two-set law on the point masses", chunk=50_000,
                         reuse_outputs=True)
    return AuditCase(
        mechanism="er-ae", pair=f"one step, point masses on words 0 and 1 of a {vocab_size}-word toy alphabet",
        input_a="a", input_b="b", sample=sample, claimed_epsilon=claimed, claimed_delta=claimed_delta,
        events="discrete", chunk=50_000, curve=curve, conformance=conf,
    )


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
