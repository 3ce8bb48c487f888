"""Completeness: HOL Light's own Examples/ files get bare hol-light's verdict under the kit.

Debian's hol-light ships them in /usr/share/hol-light/Examples/ (its holtest script loads each
in a fresh toplevel). The corpus is those that need only HOL Light's core or its Library/
(tests/support/corpora.py's HOL_LIGHT_EXAMPLES). Each file is labelled by a fresh bare
`hol-light` toplevel that `loadt`s it, as holtest does: loaded when the toplevel printed no
error. The kit must pass what bare hol-light loads, its theorems replayed, and fail the rest.

A bare boot takes minutes, so CI checks one small file on the local backend (its bare label is
one boot; the kit's worker is the one the HOL Light modules share); `python -m benchmarks.corpora
hol-light` runs the whole corpus beside bare hol-light.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import pytest

from benchmarks.corpora import HOL_LIGHT_BARE_TIMEOUT_S, HOL_LIGHT_TIMEOUT_S
from runner.core.models import Trust
from tests.helpers import SHARES_HOL_LIGHT_BOOTS, HolLight, session_checker
from tests.support.corpora import (
    HOL_LIGHT_CI_SAMPLE,
    Agreement,
    Bare,
    agreement,
    bare_hol_light,
    hol_light_examples,
)

EXAMPLES = hol_light_examples()

pytestmark = [
    pytest.mark.slow,
    SHARES_HOL_LIGHT_BOOTS,
    pytest.mark.skipif(not EXAMPLES, reason="needs Debian's hol-light (its Examples/ files)"),
]


@pytest.fixture(scope="module")
def labels() -> dict[str, Bare]:
    """Bare hol-light's label for each file of the sample, the boots side by side."""
    with ThreadPoolExecutor(len(HOL_LIGHT_CI_SAMPLE)) as pool:
        label = functools.partial(bare_hol_light, timeout_s=HOL_LIGHT_BARE_TIMEOUT_S)
        found = pool.map(label, (EXAMPLES[name] for name in HOL_LIGHT_CI_SAMPLE))
        return dict(zip(HOL_LIGHT_CI_SAMPLE, found, strict=True))


@pytest.fixture(scope="module")
def hol(request) -> HolLight:
    return HolLight(session_checker(request, "local"), timeout=HOL_LIGHT_TIMEOUT_S)


@pytest.mark.parametrize("name", HOL_LIGHT_CI_SAMPLE)
def test_an_example_gets_bare_hol_lights_verdict(labels, hol, name):
    path = EXAMPLES[name]
    bare = labels[name]
    result = hol.check(name, content=path.read_text())
    assert agreement(bare, result) is Agreement.AGREE, (bare, result.verdict, result.diagnostics)
    if bare.accepted:
        assert result.trust in (Trust.REPLAYED, Trust.SELF_REPORTED), result.trust
        assert result.details["theorems"], "a pass says which theorems it replayed"
