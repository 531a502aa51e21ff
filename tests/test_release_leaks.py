"""Issue 9 (Earth Mover's release path): nothing private leaves in a release.

Each test here failed on the code before the fix (see the report of branch ``leaks-em``).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate
from typer.testing import CliRunner

from textdp import EarthMoversPrivacy
from textdp.accounting.bounds import document_guarantee
from textdp.cli import app
from textdp.embeddings import Embeddings, ExactDecoder
from textdp.engines import LocalBackend
from textdp.engines.corpus import obfuscate_corpus
from textdp.errors import ParameterError, PrivacyWarning
from textdp.mechanisms import privatize_ids
from textdp.text import normalize

runner = CliRunner()
WORDS = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(300)]  # letters only (normalize)
CANARY = "zqxcanaryvwzk"  # out of vocabulary: it may never appear in a release
SEED = 987654321


@pytest.fixture(scope="module")
def toy_emb() -> Embeddings:
    g = np.random.default_rng(5)
    return Embeddings(WORDS, g.standard_normal((300, 8)).astype(np.float32), name="toy")


def _texts(n: int, seed: int) -> list[str]:
    g = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = [WORDS[j] for j in g.integers(0, 300, g.integers(8, 20))]
        words.insert(int(g.integers(0, len(words))), f"{CANARY}{i}")  # a unique canary in every text
        out.append(" ".join(words))
    return out


def _inputs(tmp: Path) -> list[Path]:
    """A JSONL file without ids (read by byte range) and a gzipped JSONL file with ids (spilled)."""
    tmp.mkdir(parents=True, exist_ok=True)
    plain = tmp / "alice_medical_notes.jsonl"
    plain.write_text("".join(json.dumps({"text": t}) + "\n" for t in _texts(40, 1)), encoding="utf-8")
    packed = tmp / "bob_letters.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as fh:
        for i, t in enumerate(_texts(25, 2)):
            fh.write(json.dumps({"id": f"letter{i}", "text": t}) + "\n")
    return [plain, packed]


def _secrets(inputs: list[Path]) -> list[bytes]:
    """Everything that identifies the inputs: canary, paths, names, sizes, times, hashes, the seed."""
    out = [CANARY.encode(), CANARY.upper().encode(), str(SEED).encode(),
           hashlib.sha256(str(SEED).encode()).hexdigest()[:12].encode()]
    for p in inputs:
        st = p.stat()
        data = p.read_bytes()
        out += [str(p).encode(), str(p.resolve()).encode(), p.name.encode(), p.stem.encode(),
                str(st.st_mtime_ns).encode(), str(st.st_mtime).encode(), f'"bytes": {st.st_size}'.encode(),
                f": {st.st_size}".encode()]
        for h in ("sha256", "sha1", "md5", "blake2b"):
            out.append(hashlib.new(h, data).hexdigest()[:12].encode())
    texts = _texts(40, 1) + _texts(25, 2)
    for t in texts:
        out.append(hashlib.sha256(t.encode()).hexdigest()[:12].encode())
    return out


def _assert_clean(out: Path, inputs: list[Path]) -> None:
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files, "no output"
    needles = _secrets(inputs)
    found = {(p.relative_to(out).as_posix(), n) for p in files for n in needles if n in p.read_bytes()}
    assert not found, f"the output folder holds private information: {sorted(found)[:8]}"
    names = {p.relative_to(out).as_posix() for p in files}
    assert all(n.startswith("part-") or n in ("manifest.json", "settings.json") for n in names), names
    recs = [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]
    assert [r["id"] for r in recs] == [str(i) for i in range(40)] + [f"letter{i}" for i in range(25)]
    for r in recs:
        assert not {"n_tokens", "dropped_oov", "unchanged_fraction", "mean_neighbour_rank"} & set(r)


def test_partitioned_local_run_leaves_no_trace_of_the_input(tmp_path, toy_emb, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(cache))
    inputs = _inputs(tmp_path / "in")
    np.save(tmp_path / "v.npy", np.asarray(toy_emb.vectors))
    (tmp_path / "w.txt").write_text("\n".join(WORDS) + "\n")
    out = tmp_path / "release"
    args = ["obfuscate", *map(str, inputs), "-e", "5", "-n", "6", "--embeddings", str(tmp_path / "v.npy"),
            "--words", str(tmp_path / "w.txt"), "--stop-words", "none", "--seed", str(SEED), "--engine", "local",
            "--partitions", "4"]
    res = runner.invoke(app, [*args, "-o", str(out)])
    assert res.exit_code == 0, res.output
    _assert_clean(out, inputs)
    # the private state went to a work directory outside the output, deleted (resume key included) at completion
    assert [p.name for p in (cache / "runs").iterdir()] == [".salt"]
    settings = json.loads((out / "settings.json").read_text())
    assert settings["seeded"] is True and settings["size"] == 6 and settings["documents"] == 65
    # a private report is never written into the release folder
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "r2"), "--private-report", str(tmp_path / "r2" / "x.jsonl")])
    assert res.exit_code == 2 and "inside the output folder" in res.stderr and not (tmp_path / "r2").exists()
    # elsewhere, it has what the records lack, keyed by record id
    report = tmp_path / "private" / "report.jsonl"
    res = runner.invoke(app, [*args, "-o", str(tmp_path / "r3"), "--private-report", str(report)])
    assert res.exit_code == 0, res.output
    _assert_clean(tmp_path / "r3", inputs)
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert [r["id"] for r in rows][:2] == ["0", "1"] and rows[0]["source"] == f"{inputs[0]}:1"
    assert rows[-1]["source"].startswith(str(inputs[1])) and rows[0]["dropped_oov"] == 1 and len(rows) == 65


def test_partitioned_dask_run_leaves_no_trace_of_the_input(tmp_path, toy_emb, monkeypatch):
    from textdp.engines.dask import DaskBackend

    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    inputs = _inputs(tmp_path / "in")
    out = tmp_path / "release"
    with DaskBackend(workers=2, processes=False) as be:
        obfuscate_corpus(inputs, out, embeddings=toy_emb, epsilon=5.0, size=6, bag="sample", stop_words=None,
                         decoder="exact", seed=SEED, backend=be, partitions=3)
    _assert_clean(out, inputs)
    assert not (tmp_path / "cache" / "runs" / "input").exists()


def test_work_dir_is_never_inside_the_output_and_a_run_is_found_again(tmp_path, toy_emb):
    inputs = _inputs(tmp_path / "in")
    out = tmp_path / "release"
    kw = {"embeddings": toy_emb, "epsilon": 5.0, "size": 6, "bag": "truncate", "stop_words": None,
          "decoder": "exact", "seed": 1, "backend": LocalBackend(), "partitions": 3}
    with pytest.raises(ParameterError, match="inside the output folder"):
        obfuscate_corpus(inputs, out, work_dir=out / "work", **kw)
    with pytest.raises(ParameterError, match="size N must be public"):
        obfuscate_corpus(inputs, out, work_dir=tmp_path / "w", **{**kw, "size": None})
    obfuscate_corpus(inputs, out, work_dir=tmp_path / "w", **kw)
    assert not (tmp_path / "w").exists()  # complete: its private state (resume key included) is gone
    # a completed run can no longer be told from another one: refused, whatever the work directory
    for work in (tmp_path / "w", tmp_path / "other"):
        with pytest.raises(ParameterError, match="holds a completed run"):
            obfuscate_corpus(inputs, out, work_dir=work, **kw)
        assert not work.exists()


def test_size_from_data_in_partitioned_runs_is_explicit_and_recorded(tmp_path, toy_emb):
    inputs = _inputs(tmp_path / "in")
    seen: list[int] = []
    summary = obfuscate_corpus(inputs, tmp_path / "out", embeddings=toy_emb, epsilon=5.0, size=None,
                               size_from_data=True, bag="truncate", stop_words=None, decoder="exact", seed=None,
                               backend=LocalBackend(), work_dir=tmp_path / "w", on_size_from_data=seen.append)
    assert summary["size_from_data"] is True and summary["size"] == seen[0] == 8  # texts hold >= 8 known words
    assert "reveals that length" in summary["guarantee"]["statement"] and summary["seeded"] is False


def test_single_file_records_hold_no_input_statistics(tmp_path):
    doc = tmp_path / "alice_private_diary.txt"
    doc.write_text("The harbour master zorbulax counted boats, gulls and nets at dawn near the old pier.")
    out, report = tmp_path / "out.jsonl", tmp_path / "private.jsonl"
    res = runner.invoke(app, ["obfuscate", str(doc), "-e", "10", "-n", "5", "-o", str(out)])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    assert not {"n_tokens", "dropped_oov"} & set(rec), rec
    res = runner.invoke(app, ["obfuscate", str(doc), "-e", "10", "-n", "5", "-o", str(out), "--force",
                              "--private-report", str(report)])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    assert rec["id"] == "0" and len(rec["words"]) == 5
    assert not {"n_tokens", "dropped_oov", "unchanged_fraction", "mean_neighbour_rank"} & set(rec)
    text = out.read_text() + (tmp_path / "out.jsonl.settings.json").read_text()
    assert doc.name not in text and str(tmp_path) not in text and "zorbulax" not in text
    settings = json.loads((tmp_path / "out.jsonl.settings.json").read_text())
    assert settings["seeded"] is False and "inputs" not in settings
    (row,) = [json.loads(line) for line in report.read_text().splitlines()]
    assert row["id"] == "0" and row["source"] == str(doc) and row["dropped_oov"] == 1
    assert row["n_tokens"] == len(normalize(doc.read_text()))
    # --report (diagnostics inside the records) does not exist: the usage error names --private-report
    res = runner.invoke(app, ["obfuscate", str(doc), "-e", "10", "-n", "5", "--report"])
    assert res.exit_code == 2 and "--private-report" in res.stderr


def test_size_must_be_public(tmp_path, glove):
    doc = tmp_path / "d.txt"
    doc.write_text("harbour boats gulls market bread fisherman")
    res = runner.invoke(app, ["obfuscate", str(doc), "-e", "10"])
    assert res.exit_code == 2 and "--size N is required" in res.stderr
    res = runner.invoke(app, ["obfuscate", str(doc), "-e", "10", "--size-from-data", "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 0 and "warning:" in res.stderr and "reveals that length" in res.stderr
    settings = json.loads((tmp_path / "o.jsonl.settings.json").read_text())
    assert settings["size"] == 6 and settings["size_from_data"] is True
    with pytest.raises(ParameterError, match="must be public"):
        EarthMoversPrivacy(epsilon=10, embeddings=glove).privatize("harbour boats gulls")
    with pytest.warns(PrivacyWarning):
        d = EarthMoversPrivacy(epsilon=10, embeddings=glove, size_from_data=True).privatize("harbour boats gulls")
    assert d.guarantee.size == 3 and d.guarantee.size_from_data


def test_returned_documents_hold_no_input(glove):
    text = "fisherman harbour gulls nets boats bakery apples market baskets children"
    mech = EarthMoversPrivacy(epsilon=1.0, size=10, embeddings=glove, seed=3)
    doc = mech.privatize(text)
    secret = set(text.split()) - set(doc.words)
    assert len(secret) >= 8  # epsilon 1: nearly every word changes
    blob = pickle.dumps(doc).decode("latin-1") + json.dumps(dataclasses.asdict(doc), default=str)
    leaked = {w for w in secret if w in blob}
    assert not leaked, f"the returned document holds input words {leaked}"
    assert not hasattr(doc, "input_words")


class SpyDecoder:
    """The exact decoder, recording what it was given."""

    name = "exact"
    exact = True

    def __init__(self, vectors: np.ndarray) -> None:
        self.inner = ExactDecoder(vectors)
        self.calls: list[object] = []

    def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
        self.calls.append(sources)
        return self.inner.decode(queries, sources=sources)


def test_default_decoding_never_sees_the_input_words(glove, toy_emb, tmp_path):
    mech = EarthMoversPrivacy(epsilon=40, size=5, embeddings=glove, seed=0).fit()
    spy = SpyDecoder(glove.vectors)
    mech.decoder_ = spy
    mech.privatize_batch(["harbour boats gulls market bread", "quantum lattice spinor manifold tensor"])
    vec = np.array([[0.0, 0.0], [3.0, 0.0]])
    spy2 = SpyDecoder(vec)
    privatize_ids(np.array([[0, 1]]), vec, 5.0, np.random.default_rng(0), spy2)
    assert spy.calls and spy2.calls and all(c is None for c in spy.calls + spy2.calls)
    assert spy.inner.stats["known_source"] == 0 and spy.inner._nb_have is None  # no cache keyed by input words
    # the shortcut is an explicit opt-in, with the same words
    fast = EarthMoversPrivacy(epsilon=40, size=5, embeddings=glove, seed=0, known_source=True).fit()
    spy3 = SpyDecoder(glove.vectors)
    fast.decoder_ = spy3
    a = fast.privatize("harbour boats gulls market bread")
    b = EarthMoversPrivacy(epsilon=40, size=5, embeddings=glove, seed=0).privatize("harbour boats gulls market bread")
    assert a.words == b.words and all(c is not None for c in spy3.calls)
    # the engine's cached estimator decodes without sources too, and is never modified (size and
    # generator are arguments of each job)
    from textdp.engines.corpus import (
        JobSettings,
        _mechanism,
        plan_partitions,
        run_partition,
        save_vocabulary,
    )
    from textdp.engines.workdir import vocabulary_digests

    inp = tmp_path / "c.jsonl"
    inp.write_text("".join(json.dumps({"text": " ".join(WORDS[i : i + 9])}) + "\n" for i in range(30)))
    plan = plan_partitions([inp], partitions=2)
    vocab = save_vocabulary(toy_emb, tmp_path / "work", "fp")
    vectors_sha256, words_sha256 = vocabulary_digests(toy_emb)
    s = JobSettings(vocab_dir=str(vocab), vocab_name="toy", epsilon=50.0, size=4, bag="truncate", stop_words=None,
                    decoder="exact", known_source=False, text_field="text", id_field="id", fmt="jsonl",
                    out_dir=str(tmp_path / "o"), report_dir=None, seeded=True, size_from_data=False,
                    vectors_sha256=vectors_sha256, words_sha256=words_sha256)
    cached = _mechanism(s)
    state = cached.rng_.bit_generator.state
    run_partition((plan[0], s, np.random.default_rng(1)))
    run_partition((plan[1], dataclasses.replace(s, size=7), np.random.default_rng(2)))
    assert _mechanism(dataclasses.replace(s, size=7)) is cached and cached.size is None
    def _canon(st: object) -> str:  # bit-generator states may hold numpy arrays (AES-CTR)
        return json.dumps(st, sort_keys=True, default=lambda a: np.asarray(a).tolist())

    assert _canon(cached.rng_.bit_generator.state) == _canon(state)
    dec = cached.decoder_
    assert dec.stats["queries"] == 15 * 4 + 15 * 7 and dec.stats["known_source"] == 0 and dec._nb_have is None
    recs = [json.loads(line) for f in sorted((tmp_path / "o").glob("part-*")) for line in f.read_text().splitlines()]
    assert [len(r["words"]) for r in recs] == [4] * 15 + [7] * 15


# -- --bag sample: the document-level bound --------------------------------------------------------
H = 0.05  # grid spacing of the toy 2-D vocabulary
EPS = 3.0


def _grid() -> tuple[Embeddings, int, int]:
    xs = np.round(np.arange(-1.0, 2.5 + H / 2, H), 10)
    ys = np.round(np.arange(-1.5, 1.5 + H / 2, H), 10)
    pts = np.array([(x, y) for x in xs for y in ys])
    names = [f"{chr(97 + i // 676)}{chr(97 + i // 26 % 26)}{chr(97 + i % 26)}" for i in range(len(pts))]
    a = int(np.argmin(np.linalg.norm(pts - [0.0, 0.0], axis=1)))
    b = int(np.argmin(np.linalg.norm(pts - [0.5, 0.0], axis=1)))
    names[a], names[b] = "aa", "bb"
    return Embeddings(names, pts, name="grid"), a, b


def _cell_probability(src: tuple[float, float], centre: tuple[float, float], half: float = H / 2) -> float:
    """P(src + planar Laplace noise lands in the square decoding cell of ``centre``) (density eps^2/2pi e^{-eps r})."""
    c = EPS**2 / (2 * np.pi)

    def f(y: float, x: float) -> float:
        return c * np.exp(-EPS * np.hypot(x - src[0], y - src[1]))

    val, _ = integrate.dblquad(f, centre[0] - half, centre[0] + half, centre[1] - half, centre[1] + half,
                               epsabs=1e-13, epsrel=1e-10)
    return float(val)


def test_sample_mode_bound_holds_where_the_old_one_fails(tmp_path):
    """"aa bb" vs "aa aa", epsilon 3, N 2 (issue 9 item 7): exact output probabilities on a 2-D grid vocabulary."""
    emb, a, _ = _grid()
    # the exact worst-case ratio: both draws decode to one cell o; P_D(o) = (K(a,o) + K(b,o))/2, P_D'(o) = K(a,o)
    worst = 0.0
    for o in [(0.5, 0.0), (1.0, 0.0), (2.0, 0.0), (0.5, 0.3)]:
        ka, kb = _cell_probability((0.0, 0.0), o), _cell_probability((0.5, 0.0), o)
        worst = max(worst, ((ka + kb) / 2 / ka) ** 2)
    assert worst > 7.0
    # the mechanism really has these cell probabilities (Monte Carlo through the library, exact decoding)
    n = 200_000
    out = privatize_ids(np.full((n, 1), a), emb.vectors, EPS, np.random.default_rng(8)).ravel()
    pts = np.asarray(emb.vectors)[out]
    near_b = np.all(np.abs(pts - [0.5, 0.0]) < 2.5 * H + 1e-9, axis=1)  # the 5 x 5 cells around bb
    block = _cell_probability((0.0, 0.0), (0.5, 0.0), half=2.5 * H)
    assert abs(np.mean(near_b) - block) < 5 * np.sqrt(block / n)
    # the old statement (E_d of the bags) is violated; the document-level bound holds
    old = document_guarantee("aa bb", "aa aa", epsilon=EPS, size=2, embeddings=emb, stop_words=None)
    assert old.multiplier == pytest.approx(np.exp(1.5), rel=1e-9) and worst > old.multiplier
    new = document_guarantee("aa bb", "aa aa", epsilon=EPS, size=2, embeddings=emb, stop_words=None, bag="sample")
    assert new.wasserstein_infinity == pytest.approx(0.5) and new.multiplier == pytest.approx(np.exp(3.0))
    assert worst <= new.multiplier
    # and the sharper mixture bound of the module notes, ((1 + e^{eps d}) / 2)^N, holds too
    assert worst <= ((1 + np.exp(1.5)) / 2) ** 2
    # the record and the CLI state the same bound
    mech = EarthMoversPrivacy(epsilon=EPS, size=2, embeddings=emb, stop_words=None, bag="sample")
    assert "exp(3*2*W_inf(p_D,p_D'))" in mech.privatize("aa bb").guarantee.statement
    np.save(tmp_path / "v.npy", np.asarray(emb.vectors))
    (tmp_path / "w.txt").write_text("\n".join(emb.words) + "\n")
    (tmp_path / "a.txt").write_text("aa bb")
    (tmp_path / "b.txt").write_text("aa aa")
    res = runner.invoke(app, ["guarantee", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "-e", "3", "-n", "2",
                              "--bag", "sample", "--embeddings", str(tmp_path / "v.npy"), "--words",
                              str(tmp_path / "w.txt"), "--stop-words", "none", "--json"])
    assert res.exit_code == 0, res.output
    js = json.loads(res.stdout)
    assert js["wasserstein_infinity"] == pytest.approx(0.5) and js["multiplier"] == pytest.approx(np.exp(3.0))


def test_layering_engine_and_accounting_imports():
    """The engine never imports the CLI; mechanisms never import accounting; imports are at module top."""
    import ast

    import textdp

    root = Path(textdp.__file__).resolve().parent

    def imports(path: Path) -> list[tuple[str, bool]]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(n) for n in tree.body}
        out = []
        pkg = path.relative_to(root.parent).with_suffix("").parts[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = list(pkg[: len(pkg) - node.level + 1]) if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                out.append((mod, id(node) in top))
            elif isinstance(node, ast.Import):
                out += [(a.name, id(node) in top) for a in node.names]
        return out

    for p in (root / "engines").glob("*.py"):
        assert not [m for m, _ in imports(p) if m.startswith("textdp.cli")], p
    for p in (root / "mechanisms").glob("*.py"):
        bad = [m for m, _ in imports(p) if m.startswith(("textdp.accounting", "textdp.cli", "textdp.engines",
                                                         "textdp.pipeline", "textdp.evaluation"))]
        assert not bad, (p, bad)
    for p in (root / "accounting").glob("*.py"):
        inner = [m for m, top in imports(p) if m.startswith("textdp") and not top]
        assert not inner, (p, inner)
    assert (root / "pipeline.py").exists()  # the document job lives in the library
    assert not [m for m, _ in imports(root / "pipeline.py") if m.startswith(("textdp.cli", "textdp.engines"))]
    src = (root / "engines" / "corpus.py").read_text()
    assert "np.random.Generator(" not in src and "PCG64" not in src and "_MECH_LOCK" not in src


def test_ids_are_sequence_numbers_unless_the_input_has_an_id(tmp_path):
    from textdp.io import read_documents

    a = tmp_path / "alice.txt"
    a.write_text("one")
    b = tmp_path / "notes.jsonl"
    b.write_text('{"text": "two"}\n\n{"id": "k7", "text": "three"}\n{"text": "four"}\n')
    docs = read_documents([a, b])
    assert docs == [("0", "one"), ("1", "two"), ("k7", "three"), ("3", "four")]
    assert not any(str(tmp_path) in i or "alice" in i for i, _ in docs)
