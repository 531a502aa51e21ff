from __future__ import annotations

import numpy as np
import pytest

from textdp.errors import DocumentError, ParameterError
from textdp.text import ENGLISH_STOP_WORDS, make_bag, normalize, tokenize


def test_tokenize_and_normalise():
    assert tokenize("Hello, World! It's 2019_x") == ["hello", "world", "it", "s", "x"]
    assert normalize("The cat sat on the mat.") == ["cat", "sat", "mat"]
    assert normalize("The cat", stop_words=None) == ["the", "cat"]
    assert normalize("Über café naïve") == ["über", "café", "naïve"]
    assert "the" in ENGLISH_STOP_WORDS and len(ENGLISH_STOP_WORDS) == 318


def test_truncate_and_sample(rng):
    ids = np.arange(10)
    assert make_bag(ids, 4).tolist() == [0, 1, 2, 3]
    with pytest.raises(DocumentError, match="fewer than the bag size"):
        make_bag(ids, 11)
    s = make_bag(np.array([7, 8]), 1000, "sample", rng)
    assert set(s.tolist()) == {7, 8} and abs((s == 7).mean() - 0.5) < 0.06
    with pytest.raises(DocumentError, match="no in-vocabulary"):
        make_bag(np.array([], dtype=np.int64), 3)
    with pytest.raises(ParameterError):
        make_bag(ids, 0)
    with pytest.raises(ParameterError, match="bag mode"):
        make_bag(ids, 2, "pad")


def test_tokenize_punctuation_and_sentences():
    from textdp.text import split_sentences

    assert tokenize("Hi, Bob: 1,000 e-mails (U.S.)!", punctuation=True) == [
        "hi", ",", "bob", ":", "1,000", "e", "-", "mails", "(", "u.s.", ")", "!"]
    assert tokenize("a_b", punctuation=True) == ["a", "b"]
    text = 'He said "no." Then Dr. Who left.\nHard wrapped\nline ends here?  Yes 2 times.\n\nNext para'
    assert split_sentences(text) == [
        'He said "no."', "Then Dr. Who left.", "Hard wrapped line ends here?", "Yes 2 times.", "Next para"]
    assert split_sentences("  \n\n ") == []


def test_one_spelling_of_normalize():
    """Nothing was released, so the British ``normalise`` is not kept beside ``normalize``."""
    import textdp.text

    assert not hasattr(textdp.text, "normalise") and "normalise" not in textdp.text.__all__
