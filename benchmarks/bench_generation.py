"""ER-AE training and rewriting speed on the CPU, with same-run baselines.

Training: seconds per step of the default model (10,000 words, encoder 2x128, z 128,
generator 256, L_max 32, batch 128) on real sentence segments, for a reconstruction-only
step and an ER-AE step (10 L_embed + L_rec), each the median of ``--train-steps`` steps;
the projected time for 50,000 segments x ``--epochs`` epochs with the default 25% warm-up.
Baseline in the same run: the reconstruction-only step (ratio ER-AE / reconstruction).

Rewriting: sentences per second of ``textdp.generation`` on real test sentences (mean
length printed), batch 256, for ER-AE (two-set mechanism, autoregressive and
teacher-forced) and AE-DP (one exponential mechanism over the vocabulary). Baselines in
the same run: greedy decoding with the same network (no mechanism: the network's cost)
and the naive per-sentence loop (batch 1, the authors' ``predict_dp_two_sets`` shape).

The machine may be shared: the load average is printed before and after; each rate is
the best of ``--repeats`` runs. Beside wall-clock time the script reports the process's CPU
time (``time.process_time``): with ``--threads 1`` it is what the run would take on one
dedicated core, whatever the other jobs on the machine, so it bounds the time on two
quiet cores from above.

    python benchmarks/bench_generation.py --model /tmp/gen/model-erae        # a trained model
    python benchmarks/bench_generation.py --train-steps 5 --sentences 300      # quick check
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from textdp._rng import make_rng
from textdp.embeddings import load_embeddings
from textdp.evaluation.datasets import read_jsonl, resolve_data_dir
from textdp.generation.model import ModelConfig, build_network, losses
from textdp.generation.rewriter import AEDP, ERAE, Rewriter, SentenceMechanism
from textdp.generation.training import TrainingSettings, _tensors
from textdp.generation.vocab import Vocabulary, build_vocabulary, segment_text


def load_segments(split: str, n: int, max_length: int = 32) -> list[list[str]]:
    """Sentence segments of C50 documents of ``split``, in file order."""
    default = Path(__file__).resolve().parents[2] / "shared" / "data"  # as tests/conftest.py
    data = resolve_data_dir(os.environ.get("TEXTDP_DATA_DIR") or (default if default.is_dir() else None))
    path = data / "reuter_50_50" / "reuter_50_50.jsonl.gz"
    out: list[list[str]] = []
    for row in read_jsonl(path):
        if row.get("split") == split:
            out.extend(segment_text(row["text"], max_length))
            if len(out) >= n:
                break
    return out[:n]


def bench_training(steps: int, epochs: int, bf16: bool) -> dict[str, float]:
    emb = load_embeddings()
    segs = load_segments("train", 20_000)
    s = TrainingSettings(bf16=bf16)
    vocab = build_vocabulary(segs, emb.words, s.vocab_size)
    data = [vocab.encode(x) for x in segs]
    cfg = ModelConfig(vocab_size=vocab.size, encoder_hidden=s.encoder_hidden, latent=s.latent,
                      decoder_hidden=s.decoder_hidden, max_length=s.max_length)
    vectors = emb.vectors[[emb.index[w] for w in vocab.words]]
    rng = make_rng(0)
    net = build_network(cfg, vectors, rng)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=s.learning_rate)
    times: dict[str, list[float]] = {"reconstruction": [], "er-ae": []}
    cpu: dict[str, list[float]] = {"reconstruction": [], "er-ae": []}
    order = rng.permutation(len(data))
    batch = 0
    for kind in ("reconstruction", "er-ae"):
        for i in range(steps + 2):  # two warm-up steps not timed
            idx = order[(batch * s.batch_size) % len(data):][: s.batch_size]
            batch += 1
            tb = _tensors([data[j] for j in idx], rng, s, vocab.size)
            t0, c0 = time.perf_counter(), time.process_time()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                l_rec, l_emb = losses(net, tb["enc"], tb["len"], tb["dec_in"], tb["dec_out"], tb["mask"],
                                      tb["random"] if kind == "er-ae" else None)
                loss = l_rec if l_emb is None else 10 * l_emb + l_rec
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 5.0)
            opt.step()
            if i >= 2:
                times[kind].append(time.perf_counter() - t0)
                cpu[kind].append(time.process_time() - c0)
    rec, er = statistics.median(times["reconstruction"]), statistics.median(times["er-ae"])
    rec_cpu, er_cpu = statistics.median(cpu["reconstruction"]), statistics.median(cpu["er-ae"])
    steps_total = -(-50_000 // s.batch_size) * epochs
    warm = round(s.warmup_fraction * steps_total)
    return {"reconstruction_step_s": rec, "er_ae_step_s": er, "ratio": er / rec, "steps": steps_total,
            "projected_min": (warm * rec + (steps_total - warm) * er) / 60,
            "reconstruction_step_cpu": rec_cpu, "er_ae_step_cpu": er_cpu,
            "projected_cpu_min": (warm * rec_cpu + (steps_total - warm) * er_cpu) / 60}


def bench_rewriting(model: str | None, n: int, repeats: int, naive: int) -> list[tuple[str, float, float, float]]:
    if model is None:  # an untrained default-size model: every sentence runs to L_max (the worst case)
        emb = load_embeddings()
        tmp = Path(tempfile.mkdtemp())
        vocab = Vocabulary.from_words(emb.words[:10_000])
        cfg = ModelConfig(vocab_size=vocab.size)
        net = build_network(cfg, emb.vectors[:10_000], make_rng(0))
        vocab.save(tmp / "vocab.txt")
        (tmp / "config.json").write_text(__import__("json").dumps(cfg.to_dict()))
        torch.save(net.state_dict(), tmp / "model.pt")
        (tmp / "card.json").write_text('{"complete": true, "data": {"declared_public": true}}')
        model = str(tmp)
    rw = Rewriter(model)
    segs = load_segments("test", n, rw.max_length)
    rng = make_rng(1)
    rows = []

    def run(mech: SentenceMechanism, items: list[list[str]]) -> tuple[float, float, float]:
        best, best_cpu, mean_len = 0.0, 0.0, 0.0
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            out = mech.rewrite_segments(items, rng)
            best = max(best, len(items) / (time.perf_counter() - t0))
            best_cpu = max(best_cpu, len(items) / (time.process_time() - c0))
            mean_len = float(np.mean([len(o) for o in out]))
        return best, best_cpu, mean_len

    for label, st in (
        ("er-ae eps=5, autoregressive", ERAE(epsilon=5.0, model=rw)),
        ("er-ae eps=5, teacher-forced", ERAE(epsilon=5.0, model=rw, variant="teacher-forced")),
        ("ae-dp eps=11.5 per token", AEDP(epsilon=11.5, model=rw)),
        ("greedy (no mechanism; ae-dp at eps=1e6)", AEDP(epsilon=1e6, model=rw)),
    ):
        rows.append((label, *run(st.fit(), segs)))
    naive_mech = ERAE(epsilon=5.0, model=rw, batch_size=1).fit()
    rows.append(("naive loop: er-ae, one sentence at a time", *run(naive_mech, segs[:naive])))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="trained model directory (default: an untrained default-size model)")
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--naive-sentences", type=int, default=100)
    ap.add_argument("--train-steps", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--skip-training", action="store_true")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, cores {os.cpu_count()}, "
          f"load average before: {os.getloadavg()[0]:.2f}")
    if not args.skip_training:
        t = bench_training(args.train_steps, args.epochs, args.bf16)
        print(f"training step (batch 128, median of {args.train_steps}): reconstruction {t['reconstruction_step_s']:.2f} s "
              f"wall / {t['reconstruction_step_cpu']:.2f} s CPU, er-ae {t['er_ae_step_s']:.2f} s wall / "
              f"{t['er_ae_step_cpu']:.2f} s CPU (er-ae / reconstruction = {t['ratio']:.2f})")
        print(f"50,000 segments x {args.epochs} epochs = {t['steps']} steps -> projected {t['projected_min']:.1f} min "
              f"wall, {t['projected_cpu_min']:.1f} min CPU{' (bf16)' if args.bf16 else ''}")
    rows = bench_rewriting(args.model, args.sentences, args.repeats, args.naive_sentences)
    base = rows[-1][1]
    greedy = rows[-2][1]
    print(f"rewriting {args.sentences} C50 test sentences (batch 256, best of {args.repeats}):")
    print(f"{'':45s} {'sent/s':>9s} {'sent/CPU-s':>11s} {'mean len':>9s} {'vs naive':>9s} {'vs greedy':>10s}")
    for label, rate, rate_cpu, length in rows:
        print(f"{label:45s} {rate:9.1f} {rate_cpu:11.1f} {length:9.1f} {rate / base:8.1f}x {rate / greedy:9.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
