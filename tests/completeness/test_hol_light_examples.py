"""Completeness: HOL Light's own Examples/ files get bare hol-light's verdict under the kit.

Debian's hol-light ships them in /usr/share/hol-light/Examples/ (its holtest script loads each
in a fresh toplevel). The corpus is those that need only HOL Light's core or its Library/
(tests/support/corpora.py's HOL_LIGHT_EXAMPLES). Each file is labelled by a fresh bare
`hol-light` toplevel that `loadt`s it, as holtest does: loaded when the toplevel printed no
error. The kit must pass what bare hol-light loads, its theorems replayed, and fail the rest.

A bare boot takes minutes, so CI checks one small file on the local backend; `python -m
benchmarks.corpora hol-light` runs the whole corpus beside bare hol-light. Both label as the bench
does: Debian's hol-light boots once, with nothing of the kit, and each file is loaded in a child
forked from that toplevel (benchmarks/hol_light_fork_labels.py). The probe files below hold that
to a fresh boot's labels: a file sees nothing another defined, and errors and timeouts read alike.
The kit's worker is the one the HOL Light modules share.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.corpora import HOL_LIGHT_BARE_TIMEOUT_S, HOL_LIGHT_TIMEOUT_S
from benchmarks.hol_light_fork_labels import bare_hol_light_forked
from runner.core.models import Trust
from tests.helpers import SHARES_HOL_LIGHT_BOOTS, HolLight, session_checker
from tests.support.corpora import (
    HOL_LIGHT_CI_SAMPLE,
    Agreement,
    Bare,
    agreement,
    hol_light_examples,
)

EXAMPLES = hol_light_examples()

pytestmark = [
    pytest.mark.slow,
    SHARES_HOL_LIGHT_BOOTS,
    pytest.mark.skipif(not EXAMPLES, reason="needs Debian's hol-light (its Examples/ files)"),
]


# Loaded after the sample in the same boot, in this order, each with PROBE_TIMEOUT_S.
PROBES = {
    "defines.ml": "let defined_by_the_first_file = prove(`!n. n + 0 = n`, ARITH_TAC);;\n",
    # Loaded after defines.ml: a fresh toplevel has no such name.
    "uses_the_first.ml": "let again = defined_by_the_first_file;;\n",
    "raises.ml": "let broken = prove(`!n. n + 1 = n`, ARITH_TAC);;\n",
    "spins.ml": "let rec spin n = spin (n + 1);;\nspin 0;;\n",
}
PROBE_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def labels(tmp_path_factory) -> dict[str, Bare]:
    """Bare hol-light's label for each file of the sample and each probe, from one boot."""
    folder = tmp_path_factory.mktemp("hol-light-probes")
    paths = {name: EXAMPLES[name] for name in HOL_LIGHT_CI_SAMPLE}
    for name, text in PROBES.items():
        paths[name] = Path(folder / name)
        paths[name].write_text(text)
    timeouts = dict.fromkeys(PROBES, PROBE_TIMEOUT_S)
    found, _ = bare_hol_light_forked(paths, HOL_LIGHT_BARE_TIMEOUT_S, timeouts=timeouts)
    return found


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


# -- the bare labels themselves (no kit code) --------------------------------------------------


def test_a_good_file_is_accepted(labels):
    assert labels["defines.ml"].accepted, labels["defines.ml"]


def test_a_file_sees_nothing_an_earlier_file_defined(labels):
    label = labels["uses_the_first.ml"]
    assert not label.accepted and not label.timed_out
    assert "Unbound value defined_by_the_first_file" in label.said, label


def test_a_failed_proof_is_rejected(labels):
    label = labels["raises.ml"]
    assert not label.accepted and not label.timed_out, label


def test_a_file_that_never_ends_has_no_label(labels):
    assert labels["spins.ml"].timed_out, labels["spins.ml"]
