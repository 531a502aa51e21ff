r"""The ER-AE auto-encoder in PyTorch (extra ``[generation]``), after the authors' TF code.

Architecture (``McGill-DMaS/Authorship-Anonymization``, ``two_sets_em_model/model.py``;
textdp's CPU-sized defaults in brackets, the authors' values after them):

* frozen token embeddings: GloVe 6B 50d rows for the words [50-d; authors: 768-d BERT],
  four trainable vectors for ``<pad> <start> <unk> <end>``;
* encoder: a bidirectional GRU [128 units per direction; 256], the concatenated final
  states through a linear layer to a deterministic latent ``z`` [128; 256] (an
  auto-encoder, not a VAE);
* generator: a one-layer GRU [256; 512] with initial state ``ELU(Dense(z))`` whose input
  at every step is ``[embedding(previous token); z]``, and a dense layer over the
  vocabulary [10,000 words + 4; 20,000].

Losses (:func:`losses`): the reconstruction loss with teacher forcing (word dropout on
the decoder input is applied by the caller), summed over time and averaged over the
batch as in the authors' ``sequence_loss`` call, and the embedding reward

.. math:: L_{embed} = -\frac{1}{|P|}\sum_{positions} \Big(\frac1k\sum_{v \in top_k} γ(x, v) \log p_v
          + \frac1k\sum_{w \sim U(V), k} γ(x, w) \log p_w\Big)

with ``γ`` the cosine similarity of the frozen embeddings of ``v`` and the true token
``x`` and both ``γ`` and ``p`` clipped to ``[1e-5, 0.85]`` (gradients vanish outside, as
with ``tf.clip_by_value``); the total is ``10 · L_embed + L_rec`` after the warm-up.
Difference from the authors: their mask covers every padded position (their
``dec_seq_len`` is always ``max_len + 1``), so they also train the model to emit pads
after the end token and average ``L_embed`` over padded positions; textdp masks both
losses to the sentence and its end token.

Parameters are initialised from a :class:`numpy.random.Generator` (textdp's only
randomness source): Xavier-uniform input kernels, orthogonal recurrent kernels (as the
authors' ``orthogonal_initializer``), zero biases; torch's global generator is never used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .._validation import check_positive_int
from ..errors import ParameterError
from .sampling import torch_module
from .vocab import END, PAD, START, UNK

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from torch import Tensor
    from torch.nn import Parameter

__all__ = ["CLIP_HIGH", "CLIP_LOW", "ModelConfig", "RewriterNet", "build_network", "generate", "losses"]

CLIP_LOW, CLIP_HIGH = 1e-5, 0.85
#: ``dense``: a dense layer over the vocabulary (the authors'); ``embedding``: a dense layer to the
#: embedding dimension, then the dot product with the frozen token embeddings plus a bias per token
#: (a factorised output, about 5x fewer operations at 50-d embeddings).
OUTPUT_LAYERS = ("dense", "embedding")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the network (all public parameters).

    >>> ModelConfig(vocab_size=104).decoder_hidden
    256
    """

    vocab_size: int
    embedding_dim: int = 50
    encoder_hidden: int = 128
    latent: int = 128
    decoder_hidden: int = 256
    max_length: int = 32
    output_layer: str = "dense"

    def __post_init__(self) -> None:
        if self.output_layer not in OUTPUT_LAYERS:
            raise ParameterError(f"unknown output layer {self.output_layer!r}; choose one of: {', '.join(OUTPUT_LAYERS)}")
        for name in ("vocab_size", "embedding_dim", "encoder_hidden", "latent", "decoder_hidden", "max_length"):
            check_positive_int(getattr(self, name), name)
        if self.vocab_size < 6:
            raise ParameterError("vocab_size must be at least 6 (4 special tokens and 2 words)")

    def to_dict(self) -> dict[str, int | str]:
        """Plain-data form (``config.json``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> ModelConfig:
        """Inverse of :meth:`to_dict` (unknown keys are an error)."""
        try:
            return cls(**d)  # type: ignore[arg-type]  # unknown keys and bad values are checked here
        except TypeError as exc:
            raise ParameterError(f"bad model config: {exc}") from None


class RewriterNet(Protocol):
    """What training, generation and the rewriter use of the network (a ``torch.nn.Module``)."""

    config: ModelConfig
    reward_emb: Tensor

    def table(self) -> Tensor: ...
    def encode(self, ids: Tensor, lengths: Tensor) -> Tensor: ...
    def initial_state(self, z: Tensor) -> Tensor: ...
    def decoder_logits(self, z: Tensor, dec_in: Tensor) -> Tensor: ...
    def project(self, h: Tensor, table: Tensor) -> Tensor: ...
    def step(self, z: Tensor, prev: Tensor, h: Tensor, table: Tensor) -> tuple[Tensor, Tensor]: ...
    def parameters(self, recurse: bool = True) -> Iterator[Parameter]: ...
    def named_parameters(self) -> Iterator[tuple[str, Parameter]]: ...
    def state_dict(self) -> dict[str, Tensor]: ...
    def load_state_dict(self, state_dict: Mapping[str, Tensor]) -> object: ...
    def train(self, mode: bool = True) -> object: ...
    def eval(self) -> object: ...


@lru_cache(maxsize=1)
def _network_class() -> Callable[[ModelConfig, np.ndarray], RewriterNet]:
    torch = torch_module()
    nn = torch.nn
    F = torch.nn.functional

    class RewriterNetwork(nn.Module):  # type: ignore[name-defined]
        """Bidirectional-GRU encoder -> z -> GRU generator fed [emb(prev); z] (see the module docstring)."""

        def __init__(self, config: ModelConfig, word_vectors: np.ndarray) -> None:
            super().__init__()
            c = config
            if word_vectors.shape != (c.vocab_size - 4, c.embedding_dim):
                raise ParameterError(
                    f"word vectors have shape {word_vectors.shape}, expected {(c.vocab_size - 4, c.embedding_dim)}"
                )
            self.config = c
            self.register_buffer("word_emb", torch.from_numpy(np.array(word_vectors, dtype=np.float32, copy=True)))
            self.special_emb = nn.Parameter(torch.zeros(4, c.embedding_dim))
            self.encoder = nn.GRU(c.embedding_dim, c.encoder_hidden, batch_first=True, bidirectional=True)
            self.to_z = nn.Linear(2 * c.encoder_hidden, c.latent)
            self.init_state = nn.Linear(c.latent, c.decoder_hidden)
            self.decoder = nn.GRU(c.embedding_dim + c.latent, c.decoder_hidden, batch_first=True)
            if c.output_layer == "dense":
                self.out = nn.Linear(c.decoder_hidden, c.vocab_size)
            else:
                self.out_proj = nn.Linear(c.decoder_hidden, c.embedding_dim)
                self.out_bias = nn.Parameter(torch.zeros(c.vocab_size))
            # reward embeddings: unit word vectors, one-hot special tokens (cosine 1 with itself, 0 otherwise)
            unit = word_vectors / np.maximum(np.linalg.norm(word_vectors, axis=1, keepdims=True), 1e-12)
            reward = np.zeros((c.vocab_size, c.embedding_dim + 4), dtype=np.float32)
            reward[:4, c.embedding_dim :] = np.eye(4, dtype=np.float32)
            reward[4:, : c.embedding_dim] = unit
            self.register_buffer("reward_emb", torch.from_numpy(reward), persistent=False)

        def table(self) -> Tensor:
            return torch.cat([self.special_emb, self.word_emb], 0)

        def encode(self, ids: Tensor, lengths: Tensor) -> Tensor:
            x = F.embedding(ids, self.table())
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            _, h = self.encoder(packed)
            return self.to_z(torch.cat([h[0], h[1]], -1))

        def initial_state(self, z: Tensor) -> Tensor:
            return F.elu(self.init_state(z))[None]

        def decoder_logits(self, z: Tensor, dec_in: Tensor) -> Tensor:
            x = F.embedding(dec_in, self.table())
            zz = z[:, None, :].expand(-1, dec_in.shape[1], -1)
            h, _ = self.decoder(torch.cat([x, zz], -1), self.initial_state(z))
            return self.project(h, self.table())

        def project(self, h: Tensor, table: Tensor) -> Tensor:
            if self.config.output_layer == "dense":
                return self.out(h)
            return self.out_proj(h) @ table.T + self.out_bias

        def step(self, z: Tensor, prev: Tensor, h: Tensor, table: Tensor) -> tuple[Tensor, Tensor]:
            x = F.embedding(prev, table)[:, None, :]
            o, h = self.decoder(torch.cat([x, z[:, None, :]], -1), h)
            return self.project(o[:, 0], table), h

    return RewriterNetwork


def build_network(config: ModelConfig, word_vectors: np.ndarray, rng: np.random.Generator | None = None) -> RewriterNet:
    """The network with parameters initialised from ``rng`` (or left for ``load_state_dict`` when ``None``)."""
    torch = torch_module()
    net = _network_class()(config, word_vectors)
    if rng is not None:
        with torch.no_grad():
            for name, param in net.named_parameters():
                param.copy_(torch.from_numpy(_initial_value(name, tuple(param.shape), rng)))
    return net


def _orthogonal(rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    return q if rows >= cols else q.T


def _initial_value(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if name == "special_emb":
        return (0.5 * rng.standard_normal(shape)).astype(np.float32)
    if "bias" in name:  # includes out_bias
        return np.zeros(shape, dtype=np.float32)
    if "weight_hh" in name:  # GRU recurrent kernels: one orthogonal block per gate
        h = shape[1]
        return np.concatenate([_orthogonal(h, h, rng) for _ in range(shape[0] // h)]).astype(np.float32)
    fan_out, fan_in = shape[0], shape[1]
    if "weight_ih" in name:
        fan_out //= 3
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=shape).astype(np.float32)


def losses(
    net: RewriterNet,
    enc_ids: Tensor,
    enc_len: Tensor,
    dec_in: Tensor,
    dec_out: Tensor,
    mask: Tensor,
    random_ids: Tensor | None = None,
    *,
    k: int = 5,
) -> tuple[Tensor, Tensor | None]:
    """``(L_rec, L_embed)`` of a batch (``L_embed`` is ``None`` without ``random_ids``).

    ``dec_in`` is ``<start>`` + the (word-dropped) sentence, ``dec_out`` the sentence +
    ``<end>``, ``mask`` marks the real positions, ``random_ids`` ``(B, T, k)`` holds the
    uniform random words of the reward.
    """
    torch = torch_module()
    z = net.encode(enc_ids, enc_len)
    logp = torch.log_softmax(net.decoder_logits(z, dec_in), -1)
    nll = -logp.gather(-1, dec_out[..., None]).squeeze(-1)
    l_rec = (nll * mask).sum(1).mean()
    if random_ids is None:
        return l_rec, None
    lo, hi = math.log(CLIP_LOW), math.log(CLIP_HIGH)
    target = net.reward_emb[dec_out][..., None, :]

    def term(lp: Tensor, idx: Tensor) -> Tensor:
        gamma = (net.reward_emb[idx] * target).sum(-1).clamp(CLIP_LOW, CLIP_HIGH)
        return (gamma * lp.clamp(lo, hi)).mean(-1)

    top_lp, top_idx = logp.topk(k, dim=-1)
    per_position = term(top_lp, top_idx) + term(logp.gather(-1, random_ids), random_ids)
    l_embed = -(per_position * mask).sum() / mask.sum()
    return l_rec, l_embed


def generate(
    net: RewriterNet,
    enc_ids: Tensor,
    enc_len: Tensor,
    choose: Callable[[Tensor], Tensor],
    *,
    allowed: Tensor,
    max_length: int,
    teacher_forcing: bool = False,
) -> np.ndarray:
    """Generate up to ``max_length`` tokens per row; ``choose(logp) -> ids`` is the mechanism.

    Every step the logits of tokens outside ``allowed`` are set to ``-inf`` (pad, start and
    unk are never emitted), ``choose`` draws one token per active row, and a row stops
    when it draws ``<end>``. The next input is the drawn token (autoregressive), or, with
    ``teacher_forcing`` (the authors' variant), the private input's next token while there
    is one. Finished rows leave the batch, so the cost follows the output lengths.
    Returns ``(B, max_length)`` int64 ids, ``<pad>`` after the end.
    """
    torch = torch_module()
    B = enc_ids.shape[0]
    out = np.full((B, max_length), PAD, dtype=np.int64)
    with torch.no_grad():
        table = net.table()
        z = net.encode(enc_ids, enc_len)
        h = net.initial_state(z)
        prev = torch.full((B,), START, dtype=torch.int64)
        rows = torch.arange(B)
        banned = torch.nonzero(~allowed).squeeze(1)
        for t in range(max_length):
            logits, h = net.step(z, prev, h, table)
            logits.index_fill_(1, banned, -math.inf)
            ids = choose(torch.log_softmax(logits, -1))
            out[rows.numpy(), t] = ids.numpy()
            if teacher_forcing:
                feed = enc_len[rows] > t
                nxt = torch.where(feed, enc_ids[rows, min(t, enc_ids.shape[1] - 1)], ids)
            else:
                nxt = ids
            alive = ids != END
            if not bool(alive.all()):
                keep = torch.nonzero(alive).squeeze(1)
                rows, z, h, nxt = rows[keep], z[keep], h[:, keep], nxt[keep]
                if rows.numel() == 0:
                    break
            prev = nxt
    out[out == UNK] = PAD  # unreachable (unk is banned); kept as a last guard
    return out
