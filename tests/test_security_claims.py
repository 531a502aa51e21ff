"""The sentences of SECURITY.md that a test can check are true (issue 19, item 4).

Each test quotes the claim it checks. Fast: a 5,000-word slice of the real GloVe vectors, toy
topic matrices, and the CLI with a supplied or worst-case sensitivity (no sampling).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from textdp._rng import make_rng
from textdp.cli import app
from textdp.embeddings import ExactDecoder, load_embeddings
from textdp.errors import CacheWarning
from textdp.mechanisms import ReleaseContext, get, mechanism_class, names, noisy_vectors
from textdp.mechanisms.earth_movers import privatize_ids
from textdp.topics import GaussianNoise, LaplaceNoise
from textdp.topics.release import ROUNDING_L1, ROUNDING_L2

ROOT = Path(__file__).resolve().parents[1]
SECURITY = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
TEXT = re.sub(r"\s+", " ", SECURITY)
runner = CliRunner()


def test_no_todo_or_placeholder_is_left():
    assert "TODO" not in SECURITY and "<!--" not in SECURITY and "FIXME" not in SECURITY


# --- TopicDP --------------------------------------------------------------------------------


def test_topic_sensitivity_is_stated_bounded_by_sqrt_2m():
    """'The L2 sensitivity is bounded: at most √(2m).' (it used to say 'unbounded')."""
    from textdp.topics.sensitivity import worst_case_sensitivity

    assert "sensitivity of a topic model fit is unbounded" not in TEXT
    assert "at most √(2m)" in TEXT and "`--sensitivity worst-case`" in TEXT
    for m in (1, 5, 10):
        assert worst_case_sensitivity(m) == math.sqrt(2 * m)
    g = get("topicdp", epsilon=1.0, delta=1e-5, sensitivity="worst-case").guarantee(ReleaseContext(shape=(5, 5)))
    assert g.gamma is None and "sqrt(2m)" in g.statement


#: the topics mechanisms that add grid noise to a fitted topic matrix (read from the registry; the corpus ones
#: noise a clipped statistic in float64 and say so: test_topics_cooccurrence.py)
MATRIX_NOISE = [n for n in names("topics") if not getattr(mechanism_class(n), "takes_corpus", False)]


@pytest.mark.parametrize("name", MATRIX_NOISE)
def test_the_record_states_the_grid_and_what_the_discretisation_costs(name):
    """'The discretisation costs no extra δ or ε: ... adds g·√(mn) to the L2 sensitivity (g·mn to the L1
    sensitivity of the Laplace baseline) ... The record states the grid (`grid`, `grid_text`) and, in `noise`,
    that the rounding is folded into the sensitivity.'"""
    assert "costs **no extra δ or ε**" in TEXT
    params = ({"epsilon": 3.0, "delta": 1e-4, "sensitivity": 0.1, "gamma": 0.1}
              if mechanism_class(name).takes_sensitivity else {"epsilon": 3.0})
    family = get(name, **params)
    g = family.guarantee(ReleaseContext(shape=(3, 4)))
    d = g.to_dict()["parameters"]  # the one guarantee type's public ones
    mech = family.noise((3, 4))
    assert d["grid"] == 2.0 ** -20 and d["grid_text"] == "2^-20"
    # the noise states one of the family's two rounding sentences, by the norm it is calibrated to (read from the
    # record, never from the class: a new L1 noise that is not LaplaceNoise is checked the same way)
    stated = [s for s in (ROUNDING_L1, ROUNDING_L2) if s in d["noise"]]
    assert len(stated) == 1, d["noise"]
    if stated == [ROUNDING_L1]:
        assert "no extra epsilon" in d["noise"] and "g*mn" in d["noise"] and g.delta == 0.0
    else:
        assert "no extra delta or epsilon" in d["noise"] and "g*sqrt(mn)" in d["noise"]
    if isinstance(mech, LaplaceNoise):
        assert mech.grid_scale((3, 4)) * mech.epsilon >= 2 * 3 / mech.grid + 12  # 2m/g + mn grid units
    if isinstance(mech, GaussianNoise):
        assert mech.grid_sensitivity((3, 4)) == pytest.approx(0.1 / mech.grid + math.sqrt(12))
    raw = mech.randomize(np.full((3, 4), 0.1), seed=1)
    assert np.array_equal(raw / mech.grid, np.rint(raw / mech.grid))  # every value on the grid


def _corpus(path: Path) -> Path:
    themes = ["president press economy inflation markets", "farmer apples pears market river",
              "football team match season fans", "music band concert guitar songs"]
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(40):
            fh.write(json.dumps({"text": f"{themes[i % 4]} {themes[i // 4 % 4].split()[0]}", "author": f"u{i % 5}"})
                     + "\n")
    return path


@pytest.mark.parametrize("sensitivity", ["0.5", "worst-case"])
def test_a_topic_release_holds_no_private_sensitivity(tmp_path, sensitivity):
    """'The sensitivity appears only when it is public ...; a sampled or supplied sensitivity and the noise
    scale derived from it go to the private sidecar only.' and the record's fields are the ones listed."""
    corpus = _corpus(tmp_path / "c.jsonl")
    out, report = tmp_path / "r.json", tmp_path / "p.json"
    res = runner.invoke(app, ["topics", str(corpus), "-o", str(out), "--private-report", str(report),
                              "--mechanism", "topicdp", "--max-iter", "1", "--max-features", "30", "--model-topics", "2", "--topics", "2",
                              "--keywords", "2", "--sensitivity", sensitivity, "--no-cache", "-q", "--seed", "1"])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    for key in ("raw_matrix", "matrix", "keywords", "mechanism", "epsilon", "delta", "guarantee"):
        assert key in rec, key
    params = rec["guarantee"]["parameters"]
    for key in ("gamma", "grid", "noise", "keyword_note", "vocabulary_note"):
        assert key in params, key
    statement = json.loads(out.with_name("r.json.settings.json").read_text())["guarantee"]["statement"]
    priv = json.loads(report.read_text())
    text = json.dumps(rec) + out.with_name("r.json.settings.json").read_text()
    assert "sensitivity" not in rec and "sigma" not in text
    assert repr(priv["noise_sigma"]) not in text and f"{priv['noise_sigma']:.6g}" not in text
    if sensitivity == "0.5":
        assert "0.5" not in statement and "0.5" not in params["noise"]
    else:
        assert "sqrt(2m)" in statement


def test_security_md_names_the_vocabulary_options():
    """'By default (`--vocabulary corpus`) ... `--vocabulary glove:K` ... `--vocabulary FILE`' exist in the CLI."""
    res = runner.invoke(app, ["topics", "--help"], terminal_width=200)
    for option in ("--vocabulary", "--sensitivity"):
        assert option in res.output
    assert "`--vocabulary corpus`" in TEXT and "`--vocabulary glove:K`" in TEXT and "`--vocabulary FILE`" in TEXT


# --- decoding and timing ---------------------------------------------------------------------


class _Recorder:
    """Wraps a decoder and records what each call was given."""

    def __init__(self, inner: ExactDecoder) -> None:
        self.inner = inner
        self.calls: list[dict] = []

    def decode(self, queries: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
        self.calls.append({"sources": sources, "queries": np.array(queries)})
        return self.inner.decode(queries, sources=sources)


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return np.asarray(load_embeddings(vocab_size=5000).vectors)


def test_release_decoder_is_given_the_noisy_vectors_only(vectors):
    """'the decoder is given the noisy vectors and nothing else (never the input words)'"""
    rec = _Recorder(ExactDecoder(vectors))
    ids = make_rng(0).integers(0, 5000, size=(3, 20))
    privatize_ids(ids, vectors, 10.0, make_rng(1), rec)
    assert rec.calls and all(c["sources"] is None for c in rec.calls)


def test_decoder_work_is_a_function_of_the_noisy_vectors_alone(vectors):
    """'its work counters are a function of those vectors alone, whatever the process decoded before'"""
    gen = make_rng(2)
    z = noisy_vectors(gen.integers(4000, 5000, size=200), vectors, 10.0, gen)
    counts = []
    for history in (gen.integers(0, 200, size=300), gen.integers(4800, 5000, size=300), None):
        dec = ExactDecoder(vectors)
        if history is not None:
            dec.decode(noisy_vectors(history, vectors, 10.0, gen))
        before = dict(dec.stats)
        out = dec.decode(z)
        counts.append(({k: dec.stats[k] - before[k] for k in dec.stats}, out.tolist()))
        dec.close()
    assert counts[0] == counts[1] == counts[2]


def test_known_source_shortcut_returns_the_same_words(vectors):
    """'The opt-in known-source shortcut returns the same words as the exact decoder'"""
    gen = make_rng(3)
    for eps in (5.0, 40.0):
        src = gen.integers(0, 5000, size=300)
        z = noisy_vectors(src, vectors, eps, gen)
        plain, short = ExactDecoder(vectors), ExactDecoder(vectors)
        assert np.array_equal(plain.decode(z), short.decode(z, sources=src))
        plain.close()
        short.close()


def test_timing_numbers_match_benchmarks_md():
    """SECURITY.md's timing figures are the ones BENCHMARKS.md records with the benchmark's command."""
    bench = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert "benchmarks/bench_decode_timing.py" in TEXT and "bench_decode_timing.py" in bench
    assert "Decode time and the input words" in bench
    assert "whose work does not depend on the input words" not in TEXT  # the old, false claim
    for figure in ("1.19", "1.25", "0.93", "1.01"):
        assert f"{figure}×" in TEXT
        assert f"{figure}x" in bench


# --- textdp serve (issue 28 §3) ---------------------------------------------------------------


def _serve_app(token=None):
    pytest.importorskip("starlette", reason="textdp serve needs the [serve] extra")
    pytest.importorskip("httpx", reason="the Starlette test client needs httpx")
    from textdp.serve.app import create_app
    from textdp.serve.core import Workbench

    return create_app(Workbench(), token=token)  # the vocabulary is loaded on first use: not here


def test_serve_token_is_random_per_run_and_never_served():
    """'the server's token, 32 random bytes from the operating system, new for each run' ... 'in the fragment of
    the address' ... 'The page and its scripts hold no secret' ... 'gets 403 from the API'."""
    from starlette.testclient import TestClient

    from textdp.serve.app import page_url

    assert "32 random bytes from the operating system, new for each run" in TEXT
    assert "The page and its scripts hold no secret" in TEXT and "`Host: localhost`" in TEXT
    a, b = _serve_app(), _serve_app()
    assert a.state.token != b.state.token and len(a.state.token) == len(b.state.token) == 43  # token_urlsafe(32)
    assert page_url("127.0.0.1", 8765, a.state.token) == f"http://127.0.0.1:8765/#token={a.state.token}"
    with TestClient(a, base_url="http://127.0.0.1:8765", raise_server_exceptions=False) as c:
        served = c.get("/", headers={"Host": "localhost:8765"}).text + c.get("/static/app.js").text
        assert a.state.token not in served
        assert c.get("/api/mechanisms", headers={"Host": "localhost:8765"}).status_code == 403
        assert c.get("/api/mechanisms", headers={"X-TextDP-Token": a.state.token}).status_code == 200


@pytest.mark.parametrize("headers", [{"Host": "evil@127.0.0.1:8765"}, {"Host": "127.0.0.1:8766"},
                                     {"Host": "127.0.0.1:8765\u00e9"}, {"Origin": "http://127.0.0.1:8766"},
                                     {"Origin": "https://127.0.0.1:8765"}])
def test_serve_host_and_origin_rules(headers):
    """'userinfo (`evil@127.0.0.1`), other ports and malformed values get 403' ... 'An `Origin` header, when
    present, must be exactly this server's origin (`http`, an allowed name, this port)'."""
    from starlette.testclient import TestClient

    assert "userinfo (`evil@127.0.0.1`), other ports and malformed values get 403" in TEXT
    with TestClient(_serve_app("k"), base_url="http://127.0.0.1:8765", raise_server_exceptions=False) as c:
        raw = {"X-TextDP-Token": "k", **headers}
        r = c.get("/api/mechanisms", headers=[(k.encode(), v.encode("latin-1")) for k, v in raw.items()])
    assert r.status_code == 403 and list(r.json()) == ["error"] and "\n" not in r.json()["error"]


def test_serve_limits_are_the_stated_ones():
    """'over 100,000 bytes gets 413; the request headers must arrive within 10 seconds ... the body within 30
    seconds (408)'; 'Until then it has 2 seconds for its request headers, and at most 8 such connections wait for
    headers at once'; 'At most 64 requests with the token and 16 without run at once' and 'no access log'."""
    pytest.importorskip("uvicorn", reason="textdp serve needs the [serve] extra")
    from textdp.serve import app as serve_app
    from textdp.serve import server

    assert "over 100,000 bytes gets 413" in TEXT and "within 10 seconds of connecting" in TEXT
    assert "the body within 30 seconds (408)" in TEXT
    assert "Until then it has 2 seconds for its request headers, and at most 8 such connections" in TEXT
    assert "At most 64 requests with the token and 16 without run at once" in TEXT
    assert serve_app.MAX_BODY_BYTES == 100_000 and serve_app.BODY_TIMEOUT == 30.0
    assert server.HEADER_TIMEOUT == 10.0 and server.MAX_CONNECTIONS == 64
    app = _serve_app()
    config = server.make_server(app).config
    assert issubclass(config.http, server.HeaderDeadlineProtocol) and config.http.header_timeout == 10.0
    assert config.http.untrusted_header_timeout == 2.0 and config.http.untrusted_waiting == 8
    assert config.http.token == app.state.token.encode()
    assert isinstance(config.app, server.RequestLimit) and config.app.limits == {True: 64, False: 16}
    assert config.limit_concurrency is None and config.access_log is False


# --- the privacy ledger, model folders, keyed names (issue 28 §2-3) -------------------------


def test_ledger_folder_lock_and_anchor_are_as_stated(tmp_path, monkeypatch):
    """'textdp creates it (and any missing parent) with mode 0700 whatever the umask'; 'the ledger's event
    count and last hash in your textdp state folder (`$TEXTDP_STATE_DIR` ... `ledger-anchors/`, mode 0700'; 'A run
    waits at most 60 seconds for another run's lock'; 'missing while the ledger last anchored at its path records
    events ... is refused'; '`textdp ledger reset FILE` (or `--new-ledger`)'; 'records each release made *with that
    ledger*'."""
    import os
    import stat

    from textdp.accounting.ledger import LedgerMismatchError, PrivacyLedger

    assert "mode 0700 whatever the umask" in TEXT and "A run waits at most 60 seconds" in TEXT
    assert "`textdp ledger reset FILE` (or `--new-ledger`)" in TEXT and "records each release made *with that" in TEXT
    assert "`ledger-anchors/`, mode 0700" in TEXT and "not a cache wipe, not a second `TEXTDP_CACHE_DIR`" in TEXT
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TEXTDP_STATE_DIR", str(tmp_path / "state"))
    mask = os.umask(0)
    try:
        led = PrivacyLedger(tmp_path / "a" / "b" / "ledger.jsonl")
        led.charge({"d": (1.0, 0.0)}, mechanism="dp-mlm", unit="sentence", budget=None)
    finally:
        os.umask(mask)
    assert led.lock_timeout == 60
    for d in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "state" / "ledger-anchors"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert not (tmp_path / "cache" / "ledgers").exists()  # nothing of the ledger under the cache
    led.path.unlink()
    with pytest.raises(LedgerMismatchError, match="missing"):
        led.spent()
    assert runner.invoke(app, ["ledger", "reset", str(led.path)]).exit_code == 0
    assert led.spent() == {}
    for command in ("rewrite", "obfuscate", "topics"):
        assert "--new-ledger" in runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout


def test_model_folder_links_are_as_stated(tmp_path):
    """'Inside it, a link is followed only if it resolves to a path inside the folder: weights, config or
    tokenizer files that link elsewhere are refused with a one-line error.'"""
    from textdp.errors import ParameterError
    from textdp.generation.folders import check_model_folder

    assert "a link is followed only if it resolves to a path inside the folder" in TEXT
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "weights.safetensors").write_bytes(b"x")
    (tmp_path / "m" / "model.safetensors").symlink_to("weights.safetensors")
    assert check_model_folder(tmp_path / "m") == (tmp_path / "m").resolve()
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "m" / "config.json").symlink_to(tmp_path / "config.json")
    with pytest.raises(ParameterError, match="config.json is a link to .* outside the folder"):
        check_model_folder(tmp_path / "m")


def test_cache_names_and_checkpoints_are_keyed_as_stated(tmp_path, monkeypatch):
    """'A sampled-sensitivity cache file is named by an HMAC-SHA256 ... under your per-user secret key'; 'the
    training seed in it is sealed (XOR-ed with a pad keyed by your secret key)'."""
    from textdp.generation.training import _checkpoint_key, _seal_entropy, _unseal_entropy

    assert "named by an HMAC-SHA256 of the corpus fingerprint" in TEXT and "the training seed in it is sealed" in TEXT
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "owner"))
    sealed = _seal_entropy(123456789)
    assert "123456789" not in json.dumps(sealed) and _unseal_entropy(sealed) == 123456789
    key = _checkpoint_key({"settings": {"seed": 123456789, "epochs": 2}, "data": "f" * 64, "vocabulary": 9})
    assert "123456789" not in json.dumps(key) and "f" * 64 not in json.dumps(key)
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "other"))
    assert _unseal_entropy(sealed) != 123456789  # another secret cannot unseal it


# --- private folders: every ancestor, one descriptor, verified bytes (issue 28 §1, §3) -----------


def test_the_ancestor_rule_is_as_stated(tmp_path):
    """'each folder on the path must be owned by root or you, and not writable by group or others unless it is
    root-owned and sticky (like `/tmp`) ... such a path is refused with a one-line error naming the folder at
    fault (exit 2)'; 'Other users of the same machine are adversaries too'"""
    import os
    import tempfile

    from textdp._cache import check_private_dir, check_secure_path
    from textdp.errors import ParameterError

    assert "Other users of the same machine are adversaries too" in TEXT
    assert "unless it is root-owned and sticky (like `/tmp`)" in TEXT and "naming the folder at fault" in TEXT
    assert "cannot write to the cache directory" not in TEXT  # the old, false threat model
    tmp = Path(tempfile.gettempdir()).resolve()
    if os.stat(tmp).st_uid == 0 and os.stat(tmp).st_mode & 0o1000:
        assert check_secure_path(tmp) == tmp  # root-owned and sticky: accepted
    wd = tmp_path / "shared" / "sub" / "wd"
    wd.mkdir(parents=True, mode=0o700)
    (tmp_path / "shared").chmod(0o777)  # two levels up: the old check looked at the parent only
    with pytest.raises(ParameterError, match=f"the folder {tmp_path / 'shared'} on its path is writable by others"):
        check_private_dir(wd)
    (tmp_path / "x.jsonl").write_text('{"text": "cat dog"}\n')
    (tmp_path / "toy.txt").write_text("cat 0.5 1.0\ndog 0.25 1.5\ncar 9.0 9.0\n")
    res = runner.invoke(app, ["obfuscate", str(tmp_path / "x.jsonl"), "-o", str(tmp_path / "o"), "-n", "2", "-e", "1",
                              "--embeddings", str(tmp_path / "toy.txt"), "--engine", "local", "--work-dir", str(wd)])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and "shared on its path" in res.stderr


def test_the_work_dir_is_used_through_its_descriptor_as_stated(tmp_path):
    """'Renaming or replacing any folder on the path after the check changes nothing.' 'each reads the vocabulary
    once into its own memory' 'Nothing in the work directory is memory-mapped.' 'part files (hashed as they are
    written)'"""
    import hashlib

    from textdp._cache import open_private_dir
    from textdp.embeddings import Embeddings
    from textdp.engines.corpus import JobSettings, plan_partitions, run_partition
    from textdp.engines.workdir import load_verified_vocabulary, save_vocabulary, vocabulary_digests

    for claim in ("Opened once, used through its descriptor.", "Nothing in the work directory is memory-mapped.",
                  "part files (hashed as they are written)", "checks the bytes it loads"):
        assert claim in TEXT, claim
    assert "checks it again when it memory-maps it" not in TEXT  # the old, false sentence
    with open_private_dir(tmp_path / "a" / "wd", create=True) as d:
        d.write_bytes("state.json", b"{}")
        (tmp_path / "a").rename(tmp_path / "b")
        (tmp_path / "a" / "wd").mkdir(parents=True)
        (tmp_path / "a" / "wd" / "state.json").write_bytes(b"planted")
        assert d.read_bytes("state.json") == b"{}"
    words = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}q" for i in range(60)]
    emb = Embeddings(words, make_rng(1).standard_normal((60, 4)).astype(np.float32), name="toy")
    vocab = save_vocabulary(emb, tmp_path / "w", "fp")
    got = load_verified_vocabulary(str(vocab), "toy", *vocabulary_digests(emb))
    assert not isinstance(got.vectors, np.memmap) and not isinstance(np.asarray(got.vectors).base, np.memmap)
    inp = tmp_path / "c.jsonl"
    inp.write_text("".join(json.dumps({"text": " ".join(words[i : i + 5])}) + "\n" for i in range(8)))
    s = JobSettings(vocab_dir=str(vocab), vocab_name="toy", epsilon=5.0, size=3, bag="truncate", stop_words=None,
                    decoder="exact", known_source=False, text_field="text", id_field="id", fmt="jsonl",
                    out_dir=str(tmp_path / "o"), report_dir=None, seeded=True, size_from_data=False,
                    vectors_sha256=vectors_sha256(emb), words_sha256=vocabulary_digests(emb)[1])
    result = run_partition((plan_partitions([inp])[0], s, make_rng(2)))
    assert result.part_sha256 == hashlib.sha256((tmp_path / "o" / "part-00000.jsonl").read_bytes()).hexdigest()


def vectors_sha256(emb) -> str:
    from textdp.engines.workdir import vocabulary_digests

    return vocabulary_digests(emb)[0]


def test_the_cache_lists_every_folder_textdp_keeps_there():
    """'textdp keeps converted embeddings (`embeddings/`), ... (`ledgers/`) under one directory'"""
    src = ROOT / "src" / "textdp"
    names: set[str] = set()
    for f in src.rglob("*.py"):
        code = f.read_text(encoding="utf-8")
        names |= set(re.findall(r'cache_dir\(\)\s*/\s*"(\w+)"', code)) | set(re.findall(r'cache_dir\("(\w+)"', code))
        for const in re.findall(r"cache_dir\(([A-Z_]+)", code):
            names |= set(re.findall(rf'^{const} = "(\w+)"', code, flags=re.M))
    names.add("runs")  # USER_SECRET = ("runs", ".salt")
    assert {"embeddings", "ann", "topics", "custext", "runs", "dask"} <= names
    paragraph = TEXT[TEXT.index("## The cache") : TEXT.index("- **The cache is private to your account.**")]
    for name in sorted(names):
        assert f"(`{name}/`" in paragraph or f"`{name}/.salt`" in paragraph, name


def test_custext_groups_and_in_place_npy_are_as_stated(tmp_path, monkeypatch):
    """'a file without a valid HMAC, or that is not a partition into groups of at least k, is recomputed, never
    used'; 'An in-place `.npy` source ... is memory-mapped only if nobody but you or root can write it; otherwise
    it is read into memory'"""
    import os

    from textdp.mechanisms.exponential import cached_custext_groups, custext_groups

    assert "**CusText's groups are keyed.**" in TEXT and "is recomputed, never used" in TEXT
    assert "memory-mapped only if nobody but you or root can write it" in TEXT
    assert "the settings file of an `obfuscate` release gives the SHA-256 of it and of its words file" in TEXT
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    vec = make_rng(4).standard_normal((200, 5)).astype(np.float32)
    real = cached_custext_groups(vec, 3, min_cached=10)
    (path,) = (tmp_path / "cache" / "custext").glob("groups-*.npy")
    assert path.with_name(path.name + ".hmac").is_file()
    np.save(path, np.arange(200, dtype=np.int64))
    with pytest.warns(CacheWarning, match="ignored and computed again"):  # 'ignored with a one-line warning'
        assert np.array_equal(cached_custext_groups(vec, 3, min_cached=10), real)
    assert np.array_equal(real, custext_groups(vec, 3))
    np.save(tmp_path / "v.npy", vec)
    (tmp_path / "v.words.txt").write_text("".join(f"w{i}\n" for i in range(200)))
    os.chmod(tmp_path / "v.npy", 0o646)
    from textdp._cache import allow_shared_files
    from textdp.errors import ParameterError

    with pytest.raises(ParameterError, match="writable by others .*--allow-shared-files"):
        load_embeddings(tmp_path / "v.npy")  # a user-named file others could change: refused ...
    with allow_shared_files():  # ... unless the user says so, and then it is read into memory
        emb = load_embeddings(tmp_path / "v.npy")
    assert not isinstance(emb.vectors, np.memmap) and not isinstance(np.asarray(emb.vectors).base, np.memmap)


def test_runs_clean_refuses_a_linked_runs_folder_as_stated(tmp_path, monkeypatch):
    """'open the `runs/` folder once and refuse it if it is a symbolic link or another user's'"""
    assert "refuse it\n  if it is a symbolic link" in SECURITY or "refuse it if it is a symbolic link" in TEXT
    (tmp_path / "cache").mkdir(mode=0o700)
    (tmp_path / "project" / "src").mkdir(parents=True)
    (tmp_path / "cache" / "runs").symlink_to(tmp_path / "project")
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    res = runner.invoke(app, ["runs", "clean", "--all"])
    assert res.exit_code == 2 and "symbolic link" in res.stderr
    assert (tmp_path / "project" / "src").is_dir()


def test_dask_http_scratch_and_tcp_warning_are_as_stated(tmp_path, monkeypatch):
    """'without `--dashboard`, textdp closes them as soon as the cluster has started'; 'Its scratch space ... is in
    a folder made for the run, `<cache>/dask/<random>` (0700 ...), deleted when the run ends'; 'A plain `tcp://`
    scheduler gets a `PrivacyWarning`, printed before textdp connects to it'"""
    import os
    import stat
    import warnings

    distributed = pytest.importorskip("distributed")
    pytest.importorskip("cryptography")
    import dask

    from textdp.engines.dask import DaskBackend
    from textdp.errors import PrivacyWarning

    assert "textdp\n  closes them as soon as the cluster has started" in SECURITY or \
        "textdp closes them as soon as the cluster has started" in TEXT
    assert "printed before textdp connects to it" in TEXT
    monkeypatch.setenv("TEXTDP_CACHE_DIR", str(tmp_path / "cache"))
    with DaskBackend(workers=1, processes=False) as be:
        scheduler = be.client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.http_server._stopped)
        assert scheduler is True
        assert all(be.client.run(lambda dask_worker: dask_worker.http_server._stopped).values())
        scratch = be.scratch
        assert scratch is not None and scratch.parent == (tmp_path / "cache" / "dask").resolve()
        assert stat.S_IMODE(os.stat(scratch).st_mode) == 0o700
    assert not scratch.exists()
    with warnings.catch_warnings(record=True) as caught, dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        warnings.simplefilter("always", PrivacyWarning)
        with pytest.raises((OSError, distributed.comm.core.CommClosedError)):
            DaskBackend(scheduler="tcp://127.0.0.1:9")
    assert [w for w in caught if issubclass(w.category, PrivacyWarning)]  # issued although nothing answered
