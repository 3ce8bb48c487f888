"""Completeness: the bench's bare HOL Light labels, one boot with a child forked per file, are
fresh-boot labels: a file sees nothing another file defined, and errors and timeouts read as
the per-file boot reads them (benchmarks/hol_light_fork_labels.py).

One bare boot of Debian's hol-light (minutes under load); no kit code runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks.hol_light_fork_labels import bare_hol_light_forked

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("hol-light") is None, reason="needs Debian's hol-light"),
]

FILES = {
    "defines.ml": "let defined_by_the_first_file = prove(`!n. n + 0 = n`, ARITH_TAC);;\n",
    # Loaded after defines.ml in the same boot: a fresh toplevel has no such name.
    "uses_the_first.ml": "let again = defined_by_the_first_file;;\n",
    "raises.ml": "let broken = prove(`!n. n + 1 = n`, ARITH_TAC);;\n",
    "spins.ml": "let rec spin n = spin (n + 1);;\nspin 0;;\n",
}


@pytest.fixture(scope="module")
def labels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hol-light-files")
    paths = {}
    for name, text in FILES.items():
        paths[name] = Path(folder / name)
        paths[name].write_text(text)
    found, _ = bare_hol_light_forked(paths, timeout_s=20)
    return found


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
