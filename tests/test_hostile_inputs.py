"""Hostile input never wins: property-based tests of the tokenizer, the readers and the config.

Every reader either returns a correct result or raises one ``TextDPError`` with a one-line
message: never another exception, a traceback, or a hang. Examples are derandomized (the same
on every run) so the suite is deterministic; the CLI, Parquet and embeddings-loader tests, with
the ``xfail(strict=True)`` list of known bugs, are in ``test_hostile_cli_fuzz.py``.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from textdp.errors import TextDPError
from textdp.evaluation import config_from_dict, load_config
from textdp.io import iter_jsonl_text, read_documents
from textdp.text import make_bag, normalize, resolve_stop_words, tokenize

QUICK = settings(max_examples=150, deadline=None, database=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])

#: Any code point, surrogates and control characters included.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=300)
#: Text that can be encoded as UTF-8 (no lone surrogates).
UTF8_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=200)
LETTERS = re.compile(r"[^\W\d_]+")


def one_line(exc: BaseException) -> None:
    assert isinstance(exc, TextDPError), f"{type(exc).__name__}: {exc}"
    assert "\n" not in str(exc) and str(exc), repr(str(exc))


# -- tokenizer and normaliser ----------------------------------------------------------------------
@QUICK
@given(ANY_TEXT)
@example("İstanbul ΣΑΣ ǅemal ẞ x\u0307y \ud800abc\x00\x1b[31mred\u2028dž")
def test_tokenize_invariants(text):
    tokens = tokenize(text)
    assert all(isinstance(t, str) and LETTERS.fullmatch(t) for t in tokens)
    assert all(t == t.lower() for t in tokens)
    lowered = text.lower()
    pos = 0
    for t in tokens:  # tokens appear in order in the lower-cased text
        pos = lowered.index(t, pos) + len(t)
    assert tokenize(" ".join(tokens)) == tokens  # idempotent


@QUICK
@given(ANY_TEXT, st.sampled_from(["english", None, ("cat", "Dog")]))
def test_normalise_invariants(text, stops):
    words = normalize(text, stops)
    stop_set = resolve_stop_words(stops)
    assert all(len(w) > 1 and w not in stop_set for w in words)
    it = iter(tokenize(text))
    assert all(any(w == t for t in it) for w in words)  # a subsequence of the tokens
    assert normalize(" ".join(words), stops) == words


@QUICK
@given(st.one_of(st.none(), st.integers(), st.floats(), st.binary(), st.lists(st.text()), st.dictionaries(st.text(), st.text())))
def test_non_text_is_a_one_line_error(value):
    for fn in (tokenize, normalize):
        with pytest.raises(TextDPError) as info:
            fn(value)
        one_line(info.value)


@QUICK
@given(st.one_of(st.integers(), st.floats(), st.binary(), st.text(max_size=10), st.lists(st.one_of(st.text(), st.integers())),
                 st.frozensets(st.text())))
def test_stop_words_parameter(stops):
    try:
        out = normalize("The cat sat on THE mat", stops)
    except TextDPError as exc:
        one_line(exc)
    else:
        assert all(isinstance(w, str) for w in out)


def test_huge_input_is_linear():
    text = "Lorem ipsum, dolor 42 sit_amet! " * 200_000  # 6.4 MB
    assert len(normalize(text)) == 5 * 200_000
    assert tokenize("\u0300" * 2_000_000) == []


@QUICK
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=50), st.integers(1, 60), st.integers(0, 2**32))
def test_make_bag(ids, size, seed):
    arr = np.array(ids, dtype=np.int64)
    if size <= arr.size:
        assert make_bag(arr, size).tolist() == ids[:size]
    else:
        with pytest.raises(TextDPError):
            make_bag(arr, size)
    sampled = make_bag(arr, size, "sample", np.random.Generator(np.random.PCG64(seed)))
    assert sampled.shape == (size,) and set(sampled.tolist()) <= set(ids)


@QUICK
@given(st.one_of(st.lists(st.floats()), st.lists(st.text(max_size=3), min_size=1), st.just([[1, 2], [3, 4]]),
                 st.integers(), st.none()),
       st.one_of(st.integers(-3, 3), st.floats(), st.text(max_size=3), st.booleans()),
       st.sampled_from(["truncate", "sample", "bogus", ""]))
def test_make_bag_hostile_arguments(ids, size, mode):
    try:
        make_bag(ids, size, mode, np.random.Generator(np.random.PCG64(0)))  # type: ignore[arg-type]
    except TextDPError as exc:
        one_line(exc)


# -- JSONL and text readers ---------------------------------------------------------------------------
def _read_file(name: str, data: bytes, **kw: object) -> list[tuple[str, str]] | TextDPError:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(data)
        try:
            return read_documents([p], **kw)  # type: ignore[arg-type]
        except TextDPError as exc:
            one_line(exc)
            return exc


@QUICK
@given(st.binary(max_size=400), st.sampled_from(["x.jsonl", "x.txt", "x.ndjson", "x.jsonl.gz", "x.json"]),
       st.booleans())
def test_random_bytes_never_crash_a_reader(data, name, compress):
    payload = gzip.compress(data) if compress and name.endswith(".gz") else data
    out = _read_file(name, payload)
    if not isinstance(out, TextDPError):
        assert all(isinstance(i, str) and isinstance(t, str) for i, t in out)


DOCS = st.lists(st.tuples(UTF8_TEXT, UTF8_TEXT), max_size=8)


@QUICK
@given(DOCS, st.booleans(), st.sampled_from(["\n", "\r\n"]), st.booleans(), st.lists(st.sampled_from(["", " ", "\t"]), max_size=3))
@example([("a", "x\u2028y\x85z")], False, "\n", False, [])
def test_jsonl_round_trip(docs, ascii_only, newline, bom, blanks):
    lines = [json.dumps({"id": i, "text": t, "extra": [1, {"x": None}]}, ensure_ascii=ascii_only) for i, t in docs]
    body = newline.join(lines + blanks) + newline
    data = (b"\xef\xbb\xbf" if bom else b"") + body.encode("utf-8")
    assert _read_file("docs.jsonl", data) == [(i, t) for i, t in docs]


@QUICK
@given(UTF8_TEXT, st.booleans())
def test_text_file_round_trip(text, bom):
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    # ids are sequence numbers, never paths; an empty file holds no document (issue 38: "input has no documents")
    assert _read_file("doc.txt", data) == ([("0", text)] if text else [])


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)


@QUICK
@given(st.lists(st.dictionaries(st.sampled_from(["id", "text", "body", ""]), JSON_VALUES, max_size=3) | JSON_VALUES,
                min_size=1, max_size=4))
def test_jsonl_field_types(objects):
    content = "\n".join(json.dumps(o) for o in objects)
    try:
        docs = list(iter_jsonl_text(content, "<test>"))
    except TextDPError as exc:
        one_line(exc)
        return
    assert len(docs) == len(objects)
    for (doc_id, text), obj in zip(docs, objects):
        assert isinstance(obj, dict) and text == obj["text"] and isinstance(doc_id, str)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
        ('{"text": "x", "nested": ' + "[" * 100_000 + "]" * 100_000 + "}", "not valid JSON"),
        ('{"text": "x", "id": 1' + "0" * 5000 + "}", "not valid JSON"),
        ('{"body": "x"}', "--text-field"),
        ('{"text": 5}', "not a string"),
        ('"just a string"', "must be an object"),
        ('{"text": "a"}\x0b{"text": "b"}', "not valid JSON"),
    ],
)
def test_jsonl_hostile_lines(content, message):
    with pytest.raises(TextDPError, match=re.escape(message)) as info:
        list(iter_jsonl_text(content, "<test>"))
    one_line(info.value)


def test_huge_line_and_blank_lines():
    big = "word " * 1_000_000
    content = "\n\n  \n" + json.dumps({"id": 7, "text": big}) + "\r\n\n"
    assert [(d.id, d.text) for d in iter_jsonl_text(content, "<test>")] == [("7", big)]


def test_non_utf8_is_one_line():
    out = _read_file("x.jsonl", b'{"text": "caf\xe9"}\n')
    assert isinstance(out, TextDPError) and "byte 0xe9 at offset 13" in str(out)
    out = _read_file("x.txt", b"\xef\xbb\xbfab\xff")
    assert isinstance(out, TextDPError) and "byte 0xff at offset 5" in str(out)


# -- the TOML evaluation config --------------------------------------------------------------------------
def _load_toml(data: bytes) -> object:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "config.toml"
        p.write_bytes(data)
        try:
            return load_config(p)
        except TextDPError as exc:
            one_line(exc)
            return exc


@QUICK
@given(st.one_of(st.binary(max_size=300), UTF8_TEXT.map(lambda s: s.encode("utf-8"))))
def test_random_config_files(data):
    _load_toml(data)


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise AssertionError(v)


TOML_SCALARS = st.one_of(st.booleans(), st.integers(-10**20, 10**20), st.floats(), st.text(max_size=12))
TOML_VALUES = st.one_of(TOML_SCALARS, st.lists(TOML_SCALARS, max_size=4))
KEYS = {
    "corpus": ["name", "data_dir", "author_field", "known_words", "strip_quotes", "cut", "max_authors", "bogus"],
    "mechanism": ["epsilons", "embeddings", "vocab_size", "bag", "size", "decoder", "domain_vocab", "domain_min_count"],
    "attackers": ["models", "koppel_trials", "nn_distance", "truncate_known"],
    "utility": ["models"],
    "run": ["seed", "bootstrap", "output"],
}


@st.composite
def configs(draw: st.DrawFn) -> str:
    lines = []
    for section, keys in KEYS.items():
        if draw(st.booleans()):
            lines.append(f"[{section}]")
            for key in draw(st.lists(st.sampled_from(keys), unique=True, max_size=4)):
                lines.append(f"{key} = {_toml_value(draw(TOML_VALUES))}")
    if draw(st.booleans()):
        lines.insert(0, f"{draw(st.sampled_from(['corpus', 'run', 'x']))} = {_toml_value(draw(TOML_VALUES))}")
    return "\n".join(lines) + "\n"


@QUICK
@given(configs())
@example('corpus = 5\n')
@example('[corpus]\nname = 5\n[mechanism]\nepsilons = [1]\n')
@example('[corpus]\nname = "reuter_50_50"\n[mechanism]\nepsilons = [1]\nembeddings = 3\n')
def test_wrongly_typed_configs(text):
    _load_toml(text.encode("utf-8"))


@QUICK
@given(st.dictionaries(st.sampled_from(["corpus", "mechanism", "attackers", "utility", "run"]), JSON_VALUES, max_size=5))
def test_config_from_dict_any_json(d):
    try:
        config_from_dict(d)
    except TextDPError as exc:
        one_line(exc)


def test_config_errors_name_the_problem(tmp_path):
    p = tmp_path / "c.toml"
    p.write_bytes(b"[corpus]\nname = 'caf\xe9'\n")
    with pytest.raises(TextDPError, match="not valid UTF-8"):
        load_config(p)
    p.write_text('[corpus]\nname = "x"\nknown_words = "many"\n[mechanism]\nepsilons = [1]\n')
    with pytest.raises(TextDPError, match=r"\[corpus\] known_words has the wrong type"):
        load_config(p)
    p.write_text("corpus = [1, 2]\n")
    with pytest.raises(TextDPError, match=r"config \[corpus\] must be a table"):
        load_config(p)
    with pytest.raises(TextDPError, match="not found"):
        load_config(tmp_path)
