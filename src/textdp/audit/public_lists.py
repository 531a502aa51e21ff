"""The audit's own copy of the public English stop-word list (independent of :mod:`textdp.text`).

The list is the public one of scikit-learn's ``ENGLISH_STOP_WORDS`` (the Glasgow Information Retrieval
Group's list, 318 words), written out here so that the audit's claims and pairs never read the
library's ``resolve_stop_words`` (``tests/test_audit_independent.py`` plants an error there and
checks that no claim moves, and compares this copy with scikit-learn's when it is installed).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["AUDIT_ENGLISH_STOP_WORDS", "audit_stop_words"]

AUDIT_ENGLISH_STOP_WORDS: frozenset[str] = frozenset("""
    a about above across after afterwards again against all almost alone along already also although always am
    among amongst amoungst amount an and another any anyhow anyone anything anyway anywhere are around as at
    back be became because become becomes becoming been before beforehand behind being below beside besides
    between beyond bill both bottom but by call can cannot cant co con could couldnt cry de describe detail do
    done down due during each eg eight either eleven else elsewhere empty enough etc even ever every everyone
    everything everywhere except few fifteen fifty fill find fire first five for former formerly forty found
    four from front full further get give go had has hasnt have he hence her here hereafter hereby herein
    hereupon hers herself him himself his how however hundred i ie if in inc indeed interest into is it its
    itself keep last latter latterly least less ltd made many may me meanwhile might mill mine more moreover
    most mostly move much must my myself name namely neither never nevertheless next nine no nobody none noone
    nor not nothing now nowhere of off often on once one only onto or other others otherwise our ours ourselves
    out over own part per perhaps please put rather re same see seem seemed seeming seems serious several she
    should show side since sincere six sixty so some somehow someone something sometime sometimes somewhere
    still such system take ten than that the their them themselves then thence there thereafter thereby
    therefore therein thereupon these they thick thin third this those though three through throughout thru thus
    to together too top toward towards twelve twenty two un under until up upon us very via was we well were
    what whatever when whence whenever where whereafter whereas whereby wherein whereupon wherever whether which
    while whither who whoever whole whom whose why will with within without would yet you your yours yourself
    yourselves
""".split())


def audit_stop_words(stop_words: object) -> frozenset[str]:
    """The stop words a ``stop_words`` parameter names, by the audit's own code.

    ``"english"``: :data:`AUDIT_ENGLISH_STOP_WORDS`; ``None``: none; an iterable: its words, lower-cased.

    >>> len(audit_stop_words("english")), sorted(audit_stop_words(["The", "a"])), len(audit_stop_words(None))
    (318, ['a', 'the'], 0)
    """
    from ..errors import ParameterError

    if stop_words is None:
        return frozenset()
    if isinstance(stop_words, str):
        if stop_words != "english":
            raise ParameterError(f"unknown stop-word list {stop_words!r}; choose 'english', None or a list of words")
        return AUDIT_ENGLISH_STOP_WORDS
    if not isinstance(stop_words, Iterable):
        raise ParameterError(f"stop_words must be 'english', None or a list of words, got {stop_words!r}")
    return frozenset(str(w).lower() for w in stop_words)
