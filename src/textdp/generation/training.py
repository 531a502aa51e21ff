"""Training the rewriter (ER-AE, or the reconstruction-only auto-encoder of AE-DP), resumably.

:func:`train_rewriter` builds the vocabulary, trains with Adam (learning rate 1e-3,
gradient-norm clip 5, batch 128, word dropout 0.5 on the decoder input: the authors'
settings) and writes a model directory::

    MODEL_DIR/vocab.txt        the vocabulary (special tokens first)
    MODEL_DIR/config.json      network sizes (ModelConfig)
    MODEL_DIR/model.pt         the weights (a torch state dict; load with weights_only=True)
    MODEL_DIR/card.json        the model card: data description, settings, vocabulary source,
                               whether the training data was declared public, the SHA-256 of
                               the three files above (checked on every load); never the text,
                               and the training file names and seed only when asked
                               (``card_names_data``)
    MODEL_DIR/checkpoint.pt    while training: weights, optimiser state and position (atomic);
                               the run's seed is sealed and its data fingerprint keyed with the
                               per-user secret (see :func:`_checkpoint_key`)

A run can be bounded (``max_steps`` steps or ``max_minutes`` minutes in this call): it then
ends with a usable model (``model.pt`` and a card saying ``stopped_early``) and keeps its
checkpoint, so the same call again continues the training. A file of a model directory is
used only if it matches the hash its card recorded when it was written
(:func:`load_model_files`): a damaged or replaced ``model.pt`` is a one-line error.

A checkpoint is written every ``checkpoint_every`` steps and at every epoch end, always
atomically; calling :func:`train_rewriter` again with the same settings and data
continues from it (the batch order and all random draws derive from the seed, the epoch
and the batch index, so an interrupted and resumed run gives the same model as an
uninterrupted one). Different settings or data are refused rather than mixed.

The ER-AE objective trains on ``L_rec`` alone for the first ``warmup_fraction`` of the
steps (the authors: 15,000 of ~70,000 steps), then on ``10 · L_embed + L_rec``. The
``reconstruction`` objective (AE-DP's model) trains on ``L_rec`` throughout.

**A model trained on private data is private.** Training uses no privacy mechanism: the
weights and the vocabulary can reveal the training text. The card says so; share the
model only if its training data is public.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import pickle
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import __version__
from .._cache import keyed_digest
from .._rng import make_rng, spawn
from .._validation import check_choice, check_positive_int
from ..errors import ParameterError, TextDPError
from ..io import atomic_writer, write_json
from ..progress import ProgressCallback
from .folders import check_model_folder
from .model import OUTPUT_LAYERS, ModelConfig, build_network, losses
from .sampling import torch_module
from .vocab import END, PAD, START, UNK, Vocabulary, build_vocabulary

if TYPE_CHECKING:
    from torch import Tensor
    from torch.nn import Parameter
    from torch.optim import Optimizer

    from ..embeddings import Embeddings
    from .model import RewriterNet

__all__ = ["OBJECTIVES", "PRIVATE_MODEL_NOTE", "TrainingResult", "TrainingSettings", "train_rewriter"]

OBJECTIVES = ("er-ae", "reconstruction")
#: per objective: whether its training has the ER-AE warm-up (reconstruction first, then the two-set objective),
#: and what the model card calls the model
_WARMS_UP = {"er-ae": True, "reconstruction": False}
_MODEL_OF = {"er-ae": "er-ae", "reconstruction": "ae (reconstruction only; the AE-DP baseline's model)"}
#: Where the model vocabulary comes from: the training corpus, or GloVe's most frequent words.
VOCAB_SOURCES = ("corpus", "glove")

PRIVATE_MODEL_NOTE = (
    "This model was trained WITHOUT differential privacy. If its training data is private, the model (weights and "
    "vocabulary) is private too and must not be published; rewrites of sentences that were in its training data are "
    "not covered by the rewriting guarantee (use textdp rewrite --model-data same/unknown, the default)."
)


@dataclass(frozen=True)
class TrainingSettings:
    """Everything that determines a training run (recorded in the card; a resume must match).

    >>> TrainingSettings().objective, TrainingSettings().vocab_size
    ('er-ae', 10000)
    """

    objective: str = "er-ae"
    vocab_size: int = 10_000
    vocab_source: str = "corpus"
    max_length: int = 32
    encoder_hidden: int = 128
    latent: int = 128
    decoder_hidden: int = 256
    output_layer: str = "dense"
    epochs: int = 4
    batch_size: int = 128
    learning_rate: float = 1e-3
    clip_norm: float = 5.0
    word_dropout: float = 0.5
    warmup_fraction: float = 0.25
    embed_weight: float = 10.0
    reward_k: int = 5
    bf16: bool = False
    seed: int | None = None

    def __post_init__(self) -> None:
        check_choice(self.objective, "objective", OBJECTIVES)
        check_choice(self.vocab_source, "vocabulary source", VOCAB_SOURCES)
        check_choice(self.output_layer, "output layer", OUTPUT_LAYERS)
        for name in ("vocab_size", "max_length", "encoder_hidden", "latent", "decoder_hidden", "epochs",
                     "batch_size", "reward_k"):
            check_positive_int(getattr(self, name), name)
        for name, lo, hi in (("word_dropout", 0.0, 1.0), ("warmup_fraction", 0.0, 1.0)):
            v = getattr(self, name)
            if not (lo <= v < hi):
                raise ParameterError(f"{name} must lie in [{lo}, {hi}), got {v!r}")
        if not (self.learning_rate > 0 and self.clip_norm > 0 and self.embed_weight >= 0):
            raise ParameterError("learning_rate and clip_norm must be > 0 and embed_weight >= 0")

    def to_dict(self) -> dict[str, object]:
        """Plain-data form."""
        return asdict(self)


@dataclass(frozen=True)
class TrainingResult:
    """What :func:`train_rewriter` did."""

    model_dir: str
    steps: int
    resumed_from_step: int
    seconds: float
    final_loss: float | None
    already_trained: bool = False
    stopped_early: bool = False
    planned_steps: int = 0


def _data_fingerprint(segments: Sequence[np.ndarray]) -> str:
    h = hashlib.sha256()
    for s in segments:
        h.update(np.asarray(s, dtype=np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()


def _batches(n: int, batch_size: int, order: np.ndarray) -> list[np.ndarray]:
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


def _tensors(segs: list[np.ndarray], rng: np.random.Generator, s: TrainingSettings, vocab_size: int) -> dict[str, Tensor]:
    torch = torch_module()
    B = len(segs)
    T = max(len(x) for x in segs)
    enc = np.full((B, T), PAD, dtype=np.int64)
    for i, x in enumerate(segs):
        enc[i, : len(x)] = x
    lengths = np.array([len(x) for x in segs], dtype=np.int64)
    dec_in = np.concatenate([np.full((B, 1), START, dtype=np.int64), enc], 1)
    dec_out = np.concatenate([enc, np.full((B, 1), PAD, dtype=np.int64)], 1)
    dec_out[np.arange(B), lengths] = END
    mask = (np.arange(T + 1)[None, :] <= lengths[:, None]).astype(np.float32)
    drop = (rng.random(dec_in.shape) < s.word_dropout) & (dec_in >= 4)
    dec_in[drop] = UNK
    random_ids = rng.integers(0, vocab_size, size=(B, T + 1, s.reward_k))
    return {
        "enc": torch.from_numpy(enc), "len": torch.from_numpy(lengths), "dec_in": torch.from_numpy(dec_in),
        "dec_out": torch.from_numpy(dec_out), "mask": torch.from_numpy(mask), "random": torch.from_numpy(random_ids),
    }


def _save_checkpoint(path: Path, state: dict[str, object]) -> None:
    torch = torch_module()
    with atomic_writer(path, "wb") as fh:
        torch.save(state, fh)


def train_rewriter(
    segments: Sequence[Sequence[str]],
    model_dir: str | Path,
    embeddings: Embeddings,
    settings: TrainingSettings | None = None,
    *,
    data_description: str,
    declared_public: bool = False,
    checkpoint_every: int = 100,
    progress: ProgressCallback | None = None,
    on_step: Callable[[int], None] | None = None,
    on_loss: Callable[[int, float], None] | None = None,
    init_from: str | Path | None = None,
    max_steps: int | None = None,
    max_minutes: float | None = None,
    card_names_data: bool = False,
    on_checkpoint: Callable[[int], None] | None = None,
) -> TrainingResult:
    """Train a rewriter on token ``segments`` and write ``model_dir`` (see the module docstring).

    Parameters
    ----------
    segments : sequence of list of str
        Training sentences as tokens (:func:`textdp.generation.vocab.segment_text`), each
        at most ``settings.max_length`` tokens.
    model_dir : path
        Output directory; if it holds a checkpoint of the same run, training continues.
    embeddings : textdp.embeddings.Embeddings
        The frozen token embeddings (GloVe 6B 50d by default in the CLI).
    settings : TrainingSettings
        The run's settings (seed ``None``: fresh OS entropy, stored in the checkpoint so
        that a resume continues the same run).
    data_description : str
        What the data is (recorded in the card; never the text itself).
    declared_public : bool
        The user declares the training data public (recorded in the card; rewrites then
        default to ``--model-data public``).
    checkpoint_every : int
        Steps between checkpoints.
    progress, on_step, on_loss : callable, optional
        Called after every step: ``progress(step, total_steps)`` (:mod:`textdp.progress`),
        ``on_step(step)`` (tests use it to interrupt a run), ``on_loss(step, loss)`` (for a log or a bar).
    init_from : path, optional
        Another model directory whose training is in progress: start from its checkpoint
        if every step it took was a reconstruction-only step and its settings and data
        equal these except ``objective`` and ``warmup_fraction``. The first steps of an
        ``er-ae`` run and a ``reconstruction`` run with the same seed and data are then
        identical by construction, so the AE-DP model can share them.
    max_steps, max_minutes : optional
        A budget for this call (the CLI's ``--max-steps``/``--max-minutes``): stop after this many steps, or
        after the step that passes this many minutes, and still write a usable model (its card says
        ``stopped_early``; the checkpoint stays, so calling again continues).
    card_names_data : bool
        Write the training seed in the card. Off by default: the card names neither the
        seed nor (in the CLI) the training files unless asked, since a card travels with
        the model and both describe the private training run.
    on_checkpoint : callable, optional
        ``on_checkpoint(step)`` after every checkpoint (the CLI says what an interrupted
        run left).
    """
    s = settings or TrainingSettings()
    out = Path(model_dir)
    _check_call(out, checkpoint_every, max_steps, max_minutes)
    vocab, data, run_key = _training_data(segments, embeddings, s)
    done = _already_trained(out, run_key)
    if done is not None:
        return done
    config, word_vectors, steps_per_epoch, total, warmup = _plan(vocab, len(data), embeddings, s)
    run = _start(out, config, vocab, word_vectors, s, run_key, total, init_from, on_checkpoint)
    loss_value, stop_reason = run.train(data, vocab.size, steps_per_epoch, warmup, total, checkpoint_every,
                                        max_steps=max_steps, max_minutes=max_minutes, progress=progress,
                                        on_step=on_step, on_loss=on_loss)
    seconds = run.elapsed + time.perf_counter() - run.t0
    _write_model(run, _card(run, config, embeddings.name, s, total=total, warmup=warmup, seconds=seconds,
                            stop_reason=stop_reason, card_names_data=card_names_data, vocab=vocab,
                            data={"description": data_description, "segments": len(data),
                                  "declared_public": bool(declared_public)}), done=stop_reason is None)
    return TrainingResult(str(out), run.step, run.resumed_from, seconds, loss_value,
                          stopped_early=stop_reason is not None, planned_steps=total)


def _write_model(run: _Run, card: dict[str, object], *, done: bool) -> None:
    """``model.pt`` and then the card (which records its hash); the checkpoint goes once the training is done."""
    torch = torch_module()
    out = run.ckpt_path.parent
    with atomic_writer(out / "model.pt", "wb") as fh:
        torch.save(run.net.state_dict(), fh)
    card["files"] = {name: file_sha256(out / name) for name in MODEL_FILES}
    write_json(out / "card.json", card)
    if done:
        run.ckpt_path.unlink(missing_ok=True)


def _plan(vocab: Vocabulary, n_segments: int, embeddings: Embeddings,
          s: TrainingSettings) -> tuple[ModelConfig, np.ndarray, int, int, int]:
    """The network's configuration, its frozen word vectors, and the steps: per epoch, in all, of warm-up."""
    config = ModelConfig(vocab_size=vocab.size, embedding_dim=embeddings.dim, encoder_hidden=s.encoder_hidden,
                         latent=s.latent, decoder_hidden=s.decoder_hidden, max_length=s.max_length,
                         output_layer=s.output_layer)
    word_vectors = np.asarray(embeddings.vectors[[embeddings.index[w] for w in vocab.words]], dtype=np.float32)
    steps_per_epoch = math.ceil(n_segments / s.batch_size)
    total = steps_per_epoch * s.epochs
    warmup = round(s.warmup_fraction * total) if _WARMS_UP[s.objective] else total
    return config, word_vectors, steps_per_epoch, total, warmup


def _check_call(out: Path, checkpoint_every: int, max_steps: int | None, max_minutes: float | None) -> None:
    check_positive_int(checkpoint_every, "checkpoint_every")
    if max_steps is not None:
        check_positive_int(max_steps, "max_steps")
    if max_minutes is not None and not (max_minutes > 0 and math.isfinite(max_minutes)):
        raise ParameterError(f"max_minutes must be a positive number, got {max_minutes!r}")
    if out.exists() and not out.is_dir():
        raise ParameterError(f"{out} exists and is not a directory")


def _training_data(segments: Sequence[Sequence[str]], embeddings: Embeddings,
                   s: TrainingSettings) -> tuple[Vocabulary, list[np.ndarray], dict[str, object]]:
    """The vocabulary, the encoded segments and the run's identity (settings + data; private)."""
    segs_tok = [list(x) for x in segments if len(x) > 0]
    if not segs_tok:
        raise TextDPError("no training sentences")
    too_long = sum(len(x) > s.max_length for x in segs_tok)
    if too_long:
        raise ParameterError(f"{too_long} training segments are longer than max_length={s.max_length}")
    vocab = build_vocabulary(segs_tok, embeddings.words, s.vocab_size, source=s.vocab_source)
    data = [vocab.encode(x) for x in segs_tok]
    run_key = {"settings": _settings_key(s), "data": _data_fingerprint(data), "vocabulary": len(vocab.tokens)}
    return vocab, data, run_key


def _already_trained(out: Path, run_key: dict[str, object]) -> TrainingResult | None:
    """The result of a complete run of these settings and data already in ``out``; refuse anything else."""
    card_path, ckpt_path = out / "card.json", out / "checkpoint.pt"
    if card_path.exists():
        card = _read_card(card_path)
        if not (card.get("complete") and card.get("run_key") == _public_key(run_key)):
            raise ParameterError(f"{out} already holds a trained model with other settings or data; choose a new "
                                 "--output")
        verify_model_files(out, card)  # "already holds this model" only for files that match their hashes
        if not (card["training"].get("stopped_early") and ckpt_path.exists()):
            return TrainingResult(str(out), int(card["training"]["steps"]), int(card["training"]["steps"]), 0.0,
                                  None, already_trained=True)
    if out.exists() and any(out.iterdir()) and not ckpt_path.exists():
        raise ParameterError(f"{out} is not empty and holds no checkpoint of this run; choose a new --output")
    return None


def _start(out: Path, config: ModelConfig, vocab: Vocabulary, word_vectors: np.ndarray, s: TrainingSettings, run_key: dict[str, object],
           total: int, init_from: str | Path | None, on_checkpoint: Callable[[int], None] | None) -> _Run:
    """The network and optimiser (fresh, resumed from this run's checkpoint, or from ``init_from``'s); the
    vocabulary and the configuration are written once the checkpoint is accepted, and after this run's own
    checkpoint of its starting point, so that a run interrupted before its first step resumes too."""
    torch = torch_module()
    ckpt_path = out / "checkpoint.pt"
    state: dict[str, Any] | None = None
    shared_from: dict[str, object] | None = None
    if ckpt_path.exists():
        state = torch.load(ckpt_path, weights_only=True)
        if state.get("run_key") not in (_checkpoint_key(run_key), run_key):  # run_key: a checkpoint from before sealing
            raise ParameterError(f"{ckpt_path} belongs to a run with other settings or data; choose a new --output")
        entropy = _unseal_entropy(state)
        shared_from = state.get("shared_from")
    elif init_from is not None:
        state = _shared_start(Path(init_from), run_key, s, total)
        entropy = _unseal_entropy(state)
        shared_from = {"model_dir": str(init_from), "steps": int(state["step"])}
    else:
        entropy = int(s.seed) if s.seed is not None else int(make_rng(None).integers(2**63))
    init_rng = make_rng(np.random.SeedSequence(entropy, spawn_key=(1 << 30,)))
    net = build_network(config, word_vectors, init_rng)
    trainable = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.Adam(trainable, lr=s.learning_rate)
    run = _Run(net=net, opt=opt, trainable=trainable, settings=s, ckpt_path=ckpt_path, entropy=entropy,
               run_key=run_key, shared_from=shared_from, on_checkpoint=on_checkpoint)
    if state is not None:
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        run.step, run.start_epoch, run.start_batch = int(state["step"]), int(state["epoch"]), int(state["batch"])
        run.elapsed = float(state["elapsed"])
    run.resumed_from = run.step
    out.mkdir(parents=True, exist_ok=True)
    if not ckpt_path.exists():  # this run's own checkpoint first: a run stopped before its first step resumes
        run.t0 = time.perf_counter()
        run.checkpoint(run.start_epoch, run.start_batch)
    vocab.save(out / "vocab.txt")
    write_json(out / "config.json", config.to_dict())
    return run


@dataclass
class _Run:
    """One training run in progress: the network, its optimiser and its position (checkpointed)."""

    net: RewriterNet
    opt: Optimizer
    trainable: list[Parameter]
    settings: TrainingSettings
    ckpt_path: Path
    entropy: int
    run_key: dict[str, object]
    shared_from: dict[str, object] | None
    on_checkpoint: Callable[[int], None] | None
    step: int = 0
    start_epoch: int = 0
    start_batch: int = 0
    elapsed: float = 0.0
    resumed_from: int = 0
    t0: float = 0.0

    def checkpoint(self, epoch: int, batch: int) -> None:
        _save_checkpoint(self.ckpt_path, {
            "model": self.net.state_dict(), "optimizer": self.opt.state_dict(), "step": self.step, "epoch": epoch,
            "batch": batch, "elapsed": self.elapsed + time.perf_counter() - self.t0, **_seal_entropy(self.entropy),
            "run_key": _checkpoint_key(self.run_key), "shared_from": self.shared_from,
        })
        if self.on_checkpoint is not None:
            self.on_checkpoint(self.step)

    def train(self, data: list[np.ndarray], vocab_size: int, steps_per_epoch: int, warmup: int, total: int,
              checkpoint_every: int, *, max_steps: int | None, max_minutes: float | None,
              progress: ProgressCallback | None, on_step: Callable[[int], None] | None,
              on_loss: Callable[[int, float], None] | None) -> tuple[float | None, str | None]:
        """Train to the end or to the budget; return the last loss and why it stopped early (``None``: it did not)."""
        s = self.settings
        self.t0 = time.perf_counter()
        loss_value: float | None = None
        stop_reason: str | None = None
        self.net.train()
        for epoch in range(self.start_epoch, s.epochs):
            if stop_reason is not None:
                break
            epoch_seq = np.random.SeedSequence(self.entropy).spawn(s.epochs)[epoch]
            order_rng, *batch_rngs = spawn(epoch_seq, steps_per_epoch + 1)
            batches = _batches(len(data), s.batch_size, order_rng.permutation(len(data)))
            for bi in range(self.start_batch if epoch == self.start_epoch else 0, len(batches)):
                tb = _tensors([data[i] for i in batches[bi]], batch_rngs[bi], s, vocab_size)
                loss_value = self._step(tb, use_embed=self.step >= warmup)
                if progress is not None:
                    progress(self.step, total)
                if on_loss is not None:
                    on_loss(self.step, loss_value)
                stop_reason = self._budget_spent(total, max_steps, max_minutes)
                if self.step % checkpoint_every == 0 or bi == len(batches) - 1 or stop_reason is not None:
                    self.checkpoint(*((epoch, bi + 1) if bi + 1 < len(batches) else (epoch + 1, 0)))
                if on_step is not None:
                    on_step(self.step)
                if stop_reason is not None:
                    break
        return loss_value, stop_reason

    def _step(self, tb: dict[str, Tensor], *, use_embed: bool) -> float:
        """One optimiser step on the batch ``tb``; the loss."""
        torch = torch_module()
        s = self.settings
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s.bf16):
            l_rec, l_embed = losses(self.net, tb["enc"], tb["len"], tb["dec_in"], tb["dec_out"], tb["mask"],
                                    tb["random"] if use_embed else None, k=s.reward_k)
            loss = l_rec if l_embed is None else s.embed_weight * l_embed + l_rec
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.trainable, s.clip_norm)
        self.opt.step()
        self.step += 1
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):
            raise TextDPError(f"training diverged at step {self.step} (loss {loss_value}); lower the learning rate")
        return loss_value

    def _budget_spent(self, total: int, max_steps: int | None, max_minutes: float | None) -> str | None:
        """Why this call stops now (``None``: it goes on; a budget spent on the last step ends nothing early)."""
        reason = None
        if max_steps is not None and self.step - self.resumed_from >= max_steps:
            reason = f"step budget ({max_steps} steps in this run)"
        elif max_minutes is not None and time.perf_counter() - self.t0 >= 60.0 * max_minutes:
            reason = f"time budget ({max_minutes:g} minutes in this run)"
        return None if reason is not None and self.step >= total else reason


def _card(run: _Run, config: ModelConfig, embeddings_name: str, s: TrainingSettings, *,
          total: int, warmup: int, seconds: float, stop_reason: str | None, card_names_data: bool,
          vocab: Vocabulary, data: dict[str, object]) -> dict[str, object]:
    """The model card (see the module notes): never the text, the seed or the file names unless asked."""
    step, shared_from = run.step, run.shared_from
    training = {k: v for k, v in s.to_dict().items() if k != "seed" or card_names_data}
    return {
        "textdp_version": __version__,
        "complete": True,
        "model": _MODEL_OF[s.objective],
        "architecture": {**config.to_dict(), "encoder": "bidirectional GRU", "generator": "GRU, input [emb(prev); z], "
                         "initial state ELU(Dense(z))", "embeddings": f"{embeddings_name} (frozen)"},
        "training": {**training, "steps": step, "planned_steps": total, "warmup_steps": warmup,
                     "seconds": round(seconds, 1),
                     "stopped_early": None if stop_reason is None else {
                         "reason": stop_reason, "note": f"trained {step} of {total} steps; the model is usable, and "
                         "the same textdp train-rewriter command continues from checkpoint.pt"},
                     "resumed_from_step": run.resumed_from if run.resumed_from else None,
                     "shared_steps": None if shared_from is None else {
                         "steps": shared_from["steps"], "note": "these first steps (reconstruction only) were taken "
                         "from another run with the same seed, data and settings, identical by construction"},
                     "seed_note": ("fresh OS entropy (not recorded)" if s.seed is None else "seeded (the seed is "
                                   "written only when asked: card_names_data)" if not card_names_data else None)},
        "data": data,
        "vocabulary": {"size": vocab.size, "words": len(vocab.words), "file": "vocab.txt",
                       "source": ("the most frequent training words that have a GloVe vector" if s.vocab_source ==
                                  "corpus" else "the first words of GloVe 6B (public; independent of the training data)"),
                       "depends_on_training_data": s.vocab_source == "corpus"},
        "privacy": PRIVATE_MODEL_NOTE,
        "run_key": _public_key(run.run_key),
        # names the model in rewrite settings: random, so it fingerprints neither the data nor the weights
        "model_id": secrets.token_hex(16),
        "files": {},  # the hashes of MODEL_FILES, filled in once model.pt is written
    }


#: Settings added after checkpoints were first written: left out of the run key at these values,
#: so that an older checkpoint of the same run still resumes.
_LATER_DEFAULTS: dict[str, object] = {"output_layer": "dense"}


def _settings_key(s: TrainingSettings) -> dict[str, object]:
    return {k: v for k, v in s.to_dict().items() if not (k in _LATER_DEFAULTS and _LATER_DEFAULTS[k] == v)}


def _shared_start(src: Path, run_key: dict[str, object], s_ours: TrainingSettings, total: int) -> dict[str, Any]:
    """The checkpoint of ``src`` if it may start this run (see ``init_from``)."""
    torch = torch_module()
    path = src / "checkpoint.pt"
    if not path.exists():
        raise ParameterError(f"--init-from {src}: no checkpoint (the run finished or never started)")
    state = torch.load(path, weights_only=True)
    theirs = dict(state["run_key"])
    ours: dict[str, Any] = _checkpoint_key(run_key) if "seed" not in theirs["settings"] else run_key  # before sealing
    loose = ("objective", "warmup_fraction")
    same = (theirs["data"] == ours["data"] and theirs["vocabulary"] == ours["vocabulary"]
            and {k: v for k, v in theirs["settings"].items() if k not in loose}
            == {k: v for k, v in dict(ours["settings"]).items() if k not in loose})
    if not same:
        raise ParameterError(f"--init-from {src}: that run has other settings or data")
    s = theirs["settings"]
    their_warmup = round(s["warmup_fraction"] * total) if _WARMS_UP.get(s["objective"], True) else total
    our_warmup = round(s_ours.warmup_fraction * total) if _WARMS_UP[s_ours.objective] else total
    if int(state["step"]) > min(their_warmup, our_warmup):
        raise ParameterError(f"--init-from {src}: its checkpoint (step {state['step']}) is past the shared "
                             "reconstruction-only steps")
    state["run_key"] = run_key
    return dict(state)


def _checkpoint_key(run_key: dict[str, object]) -> dict[str, Any]:
    """The run's identity as ``checkpoint.pt`` keeps it: the data fingerprint and the seed keyed, the rest as is.

    An early-stopped model keeps its checkpoint beside a usable model: a plain SHA-256 of the
    tokenised training data there would let anyone holding the folder confirm a guessed corpus,
    and a plain seed would reveal the run's randomness (issue 28 §3). Both are replaced by
    HMAC-SHA256 under this user's secret (:func:`textdp._cache.keyed_digest`): only the owner
    can recompute them, which is all resuming needs.
    """
    plain: dict[str, Any] = dict(run_key["settings"])  # type: ignore[call-overload]
    seed = plain.pop("seed", None)
    settings: dict[str, Any] = dict(plain)
    settings["seed_keyed"] = None if seed is None else keyed_digest("textdp checkpoint seed", str(seed).encode())
    return {**run_key, "settings": settings,
            "data": keyed_digest("textdp checkpoint data", str(run_key["data"]).encode())}


def _seal_entropy(entropy: int) -> dict[str, str]:
    """The run's entropy for ``checkpoint.pt``: XOR-ed with a per-user keyed pad (a random nonce beside it).

    Resuming needs the entropy (the batch order and every random draw derive from it); only
    the user whose secret sealed it can unseal it.
    """
    nonce = secrets.token_hex(16)
    pad = int(keyed_digest("textdp checkpoint entropy", nonce.encode())[:16], 16)
    return {"entropy_sealed": str(entropy ^ pad), "entropy_nonce": nonce}


def _unseal_entropy(state: dict[str, Any]) -> int:
    """The entropy of :func:`_seal_entropy` (or the plain ``entropy`` of a checkpoint written before sealing)."""
    if "entropy_sealed" not in state:
        return int(state["entropy"])
    pad = int(keyed_digest("textdp checkpoint entropy", str(state["entropy_nonce"]).encode())[:16], 16)
    return int(state["entropy_sealed"]) ^ pad


def _public_key(run_key: dict[str, object]) -> str:
    """The card's ``run_key``: a keyed hash of the run's identity (settings + data), for its owner only.

    HMAC-SHA256 under this user's secret key (:func:`textdp._cache.user_secret`, 0600 in the
    private cache), not a plain hash: anyone holding the card and a guessed training corpus
    could recompute a plain hash and confirm the guess; only the owner can recompute this one
    (to say that a folder "already holds this trained model").
    """
    return keyed_digest("textdp model card run_key", json.dumps(run_key, sort_keys=True).encode())[:32]


def load_card(model_dir: str | Path) -> dict[str, Any]:
    """The model card of ``model_dir`` (error if the model is incomplete)."""
    p = Path(model_dir) / "card.json"
    if not p.exists():
        raise ParameterError(f"{model_dir}: no card.json; train a model with textdp train-rewriter first")
    card = _read_card(p)
    if not card.get("complete"):
        raise ParameterError(f"{model_dir}: training did not finish; rerun textdp train-rewriter to resume it")
    return card


#: The files of a model directory whose SHA-256 the card records.
MODEL_FILES = ("model.pt", "vocab.txt", "config.json")
_DAMAGED = "the model folder is damaged or was changed after training: train it again (textdp train-rewriter -o NEW)"


def _read_card(p: Path) -> dict[str, Any]:
    try:
        card = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ParameterError(f"{p}: not a readable model card ({getattr(exc, 'strerror', None) or 'not valid JSON'}); "
                             f"{_DAMAGED}") from None
    if not isinstance(card, dict):
        raise ParameterError(f"{p}: not a model card; {_DAMAGED}")
    return card


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file (read in blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_model_files(model_dir: str | Path, card: Mapping[str, object]) -> None:
    """Every model file exists and matches the SHA-256 the card recorded when it was written.

    A card without hashes (written before textdp recorded them) cannot vouch for its files: refused.
    """
    d = Path(model_dir)
    recorded = card.get("files")
    if not isinstance(recorded, dict):
        raise ParameterError(f"{d}/card.json records no file hashes (an older textdp wrote it), so the model files "
                             "cannot be checked; train the model again with this version")
    for name in MODEL_FILES:
        p = d / name
        if not p.is_file():
            raise ParameterError(f"{p} is missing; {_DAMAGED}")
        try:
            digest = file_sha256(p)
        except OSError as exc:
            raise ParameterError(f"{p}: cannot read ({exc.strerror or exc}); {_DAMAGED}") from None
        if digest != recorded.get(name):
            raise ParameterError(f"{p} does not match the SHA-256 recorded in card.json at training time; {_DAMAGED}")


def load_model_files(model_dir: str | Path) -> tuple[dict[str, Any], Vocabulary, ModelConfig, dict[str, Any]]:
    """``(card, vocabulary, config, state dict)`` of a model directory, each file verified against the card."""
    torch = torch_module()
    d = check_model_folder(model_dir)  # links may not leave the folder (generation/folders.py)
    card = load_card(d)
    verify_model_files(d, card)
    try:
        vocab = vocabulary_of(d)
        cfg = ModelConfig.from_dict(json.loads((d / "config.json").read_text(encoding="utf-8")))
        weights = (d / "model.pt").read_bytes()  # checked and loaded from the same bytes (no swap in between)
        if hashlib.sha256(weights).hexdigest() != card["files"].get("model.pt"):
            raise ParameterError(f"{d / 'model.pt'} changed while it was loaded; {_DAMAGED}")
        state = torch.load(io.BytesIO(weights), weights_only=True)
    except TextDPError:
        raise
    except (OSError, EOFError, ValueError, RuntimeError, TypeError, KeyError, pickle.UnpicklingError) as exc:
        # a file that matches its hash but does not load: say so, never a traceback
        raise ParameterError(f"{d}: cannot load the model ({type(exc).__name__}); {_DAMAGED}") from None
    if not isinstance(state, dict) or "word_emb" not in state:
        raise ParameterError(f"{d / 'model.pt'}: not a textdp rewriter state; {_DAMAGED}")
    return card, vocab, cfg, dict(state)


def vocabulary_of(model_dir: str | Path) -> Vocabulary:
    """The vocabulary of a model directory."""
    return Vocabulary.load(Path(model_dir) / "vocab.txt")
