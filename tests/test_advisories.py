"""Advisories: known soundness bugs of a record's prover version, and the known-exploit suite.

A user reading a `pass` learns from `advisories` that the kernel which gave it has a known hole
whose features the artifact uses; the flag never changes a verdict or a digest. The exploits under
tests/exploits/<prover>/ are our own reproducers, one per advisory that has one (named by its id),
plus controls: on a line where the bug is fixed the exploit must not pass; where it is not, its
record must carry the advisory. The goal: no known exploit passes without an advisory.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from runner import provers
from runner.check import advisories
from runner.check.advisories import Version
from runner.check.checker import Checker
from runner.core.models import CheckRequest, CheckResult, Provenance, Verdict
from runner.core.settings import Settings
from runner.images.lock import load_lock
from tests.helpers import SHARES_HOL_LIGHT_BOOTS, session_checker
from tests.support.exploits import (
    EXPLOITS,
    by_id,
    check,
    exploit_cases,
    judge,
)

pytestmark = SHARES_HOL_LIGHT_BOOTS

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / advisories.DIRECTORY).glob("*.toml"))
# Each exploit proves False as `main`; each control proves this as `main`.


def rocq(version_line: str) -> dict:
    return {"prover": "rocq", "install": {"kind": "local", "coqc": version_line}}


def image(prover: str, tag: str) -> dict:
    return {"prover": prover, "install": {"kind": "docker", "image": tag, "image_id": "sha256:0"}}


def ids(environment: dict) -> set[str]:
    return {advisory.id for advisory in advisories.applicable(environment)}


def flagged_result(flags: list[str]) -> CheckResult:
    """A `pass` record on 8.16.1 carrying `flags`, as a run would log it."""
    provenance = Provenance(
        host="h",
        backend="local",
        isolation="x",
        worker="w",
        started_at="",
        finished_at="",
        wall_ms=0,
    )
    return CheckResult(
        artifact="a.v",
        prover="rocq",
        mode="proof",
        verdict=Verdict.PASS,
        advisories=flags,
        env_key="k",
        environment=image("rocq", "prooflock/rocq:8.16.1"),
        request_digest="r",
        result_digest="d",
        provenance=provenance,
    )


# -- the data --------------------------------------------------------------------------------


def test_every_file_is_a_provers_and_ids_are_unique_across_them():
    # A prover with no known bug needs no file (advisories.load gives None): not a registration
    # point of a new prover. A file must name a registered prover, or its data is never read.
    assert {path.stem for path in FILES} <= set(provers.names())
    assert all(advisories.load(path.stem) is not None for path in FILES)  # each one parses
    total = sum(len(tomllib.loads(path.read_text()).get("advisory", [])) for path in FILES)
    assert len(by_id()) == total  # no id is used twice, across files too


def test_each_exploit_is_named_by_its_advisory_and_the_advisory_names_it_back():
    known = by_id()
    for path in sorted(EXPLOITS.glob("*/PL-*")):
        advisory = known[path.stem]  # a KeyError names an exploit without an advisory
        assert advisory.exploit == str(path.relative_to(ROOT))
    for advisory in known.values():
        if advisory.exploit:
            assert (ROOT / advisory.exploit).is_file(), advisory.id


@pytest.mark.parametrize(
    "bundle, prover, version",
    [
        ("example", "rocq", "8.16.1"),  # docker: the image tag
        ("example-local", "rocq", "8.16.1"),  # local: `coqc --version`
        ("example", "hol-light", "4.13.1"),  # the tag names HOL Light's snapshot: an alias
        ("example-local", "hol-light", "4.13.1"),  # local: `ocaml -version`
    ],
)
def test_the_version_is_read_from_a_published_records_environment(bundle, prover, version):
    log = ROOT / "manifests" / "results" / bundle / "log.jsonl"
    for line in log.read_text().splitlines():
        result = json.loads(line)["body"].get("result")
        if result and result["prover"] == prover:
            loaded = advisories.load(prover)
            assert loaded is not None
            assert loaded.version_of(result["environment"]) == Version.parse(version)
            return
    pytest.fail(f"no {prover} record in {log}")


def test_advisories_follow_the_line_the_record_was_checked_on():
    bookworm = ids(image("rocq", "prooflock/rocq:8.16.1"))
    trixie = ids(image("rocq", "prooflock/rocq-8.20:8.20.1"))
    sid = ids(rocq("The Rocq Prover, version 9.2.0\ncompiled with OCaml 5.3.0"))
    assert {"PL-ROCQ-18503", "PL-ROCQ-16957", "PL-ROCQ-12155", "PL-ROCQ-20413"} <= bookworm
    assert "PL-ROCQ-21682" not in bookworm  # a guard-checker bug new in 8.20
    assert "PL-ROCQ-18503" not in trixie and "PL-ROCQ-16957" not in trixie  # fixed in 8.19, 8.17
    assert {"PL-ROCQ-12155", "PL-ROCQ-21682", "PL-ROCQ-20413"} <= trixie
    assert "PL-ROCQ-20413" not in sid and "PL-ROCQ-21839" in sid  # fixed in 9.0.1; in 9.3
    forky = ids(image("rocq", load_lock().tag("rocq-9.2")))  # the rocq-9.2 line's own image
    assert forky == sid  # its tag reads as the same Rocq as its coqc
    assert not {"PL-ROCQ-20413", "PL-ROCQ-20455", "PL-ROCQ-21051", "PL-ROCQ-21685"} & forky
    assert {"PL-ROCQ-21839", "PL-ROCQ-22387"} <= forky  # not fixed in 9.2.0
    assert not ids(rocq("The Coq Proof Assistant, version 8.16.1")) ^ bookworm  # local == docker
    assert "PL-HOLLIGHT-OCAML7241" in ids(image("hol-light", "prooflock/hol-light:20230128"))
    on_ocaml_53 = ids(image("hol-light", "prooflock/hol-light:3.0.0"))
    assert "PL-HOLLIGHT-OCAML7241" not in on_ocaml_53  # fixed in OCaml 5.3.0
    assert on_ocaml_53 == {
        "PL-HOLLIGHT-OCAML14200",
        "PL-HOLLIGHT-OCAML13930",
        "PL-HOLLIGHT-OCAML13172",
    }
    assert "PL-LEAN-14484" in ids(image("lean", "prooflock/lean:4.32.0"))
    assert "PL-LEAN-14807" not in ids(image("lean", "prooflock/lean:4.34.0"))
    assert "PL-LEAN-15289" in ids(image("lean", "prooflock/lean:4.34.0"))  # fixed in 4.34.1
    assert ids(image("lean", "prooflock/lean:4.34.1")) == {"PL-LEAN-TRUSTCOMPILER"}
    assert not ids(image("lean", "prooflock/lean:4.35.0"))
    assert not ids(image("isabelle", "prooflock/isabelle:2025-2"))


def test_a_version_that_cannot_be_read_rules_no_advisory_out():
    unknown = image("hol-light", "prooflock/hol-light:20990101")  # a tag with no known OCaml
    loaded = advisories.load("hol-light")
    assert loaded is not None
    assert ids(unknown) == {advisory.id for advisory in loaded.advisory}
    assert not ids({"prover": "no-such-prover", "install": {"kind": "local"}})
    assert not ids({"prover": "hol-light", "unavailable": "no Docker daemon"})  # no install


def test_versions_compare_as_releases():
    assert Version.parse("8.16") == Version.parse("8.16.0") < Version.parse("8.16.1")
    assert Version.parse("4.34.0-rc1") < Version.parse("4.34.0") < Version.parse("v4.34.1")
    assert advisories.in_range(Version.parse("8.18.0"), ">=8.11, <8.19")
    assert not advisories.in_range(Version.parse("8.19.0"), ">=8.11, <8.19")


def test_a_record_is_flagged_only_when_its_code_uses_every_involved_feature():
    bookworm = image("rocq", "prooflock/rocq:8.16.1")

    def flags(text: str) -> list[str]:
        return advisories.flagged(CheckRequest(prover="rocq", name="a.v", content=text), bookworm)

    section = "Section S. Let b := true.\nGoal True. change_no_check True. vm_compute. exact I. Qed.\nEnd S."
    assert "PL-ROCQ-16957" in flags(section)
    assert "PL-ROCQ-16957" not in flags(section.replace("Section S.", "").replace("End S.", ""))
    commented = "(* Section S. change_no_check vm_compute *) Lemma x : True. exact I. Qed."
    assert flags(commented) == []
    on_trixie = image("rocq", "prooflock/rocq:8.20.1")  # fixed there: never flagged
    request = CheckRequest(prover="rocq", name="a.v", content=section)
    assert "PL-ROCQ-16957" not in advisories.flagged(request, on_trixie)


@pytest.mark.parametrize("path", sorted(EXPLOITS.glob("*/PL-*")), ids=lambda p: p.stem)
def test_each_exploit_is_flagged_by_its_own_advisorys_scan(path):
    unread = {"prover": path.parent.name, "install": {"kind": "local"}}  # every advisory applies
    request = CheckRequest(prover=path.parent.name, name=path.name, content=path.read_text())
    assert path.stem in advisories.flagged(request, unread)


def test_the_stderr_line_counts_what_applies_and_what_is_flagged(monkeypatch):
    line = advisories.summary([flagged_result(["PL-ROCQ-13439"]), flagged_result([])])
    assert line is not None
    applying = len(ids(image("rocq", "prooflock/rocq:8.16.1")))
    assert line.startswith(f"{applying} advisories apply to this environment; 1 records flagged")
    assert "manifests/advisories/rocq.toml" in line
    assert advisories.summary([]) is None


# -- the known-exploit suite -----------------------------------------------------------------


ROCQ_LINES = [
    pytest.param("local", None, id="local"),
    pytest.param("docker", None, id="docker", marks=pytest.mark.docker),
    # Every pinned line, in its own image (Debian trixie's Coq 8.20.1, checked cold).
    *(
        pytest.param("docker", line, id=f"docker-{line}", marks=pytest.mark.docker)
        for line in provers.get("rocq").lines
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("backend, line", ROCQ_LINES)
@pytest.mark.parametrize("path", exploit_cases("rocq"), ids=lambda p: p.stem)
def test_rocq_exploits_never_pass_without_their_advisory(request, backend, line, path):
    checker = session_checker(request, backend)
    result = check(checker, path, "rocq", line)
    if line is not None:
        assert result.environment["install"]["image"] == load_lock().tag(line)  # its own image
    judge("rocq", path, result)


@pytest.mark.slow
@pytest.mark.parametrize("path", exploit_cases("hol-light"), ids=lambda p: p.stem)
def test_hol_light_exploits_never_pass_without_their_advisory(request, path):
    checker = session_checker(request, "local")  # the session's one HOL Light boot
    judge("hol-light", path, check(checker, path, "hol-light"))


# -- in records and on the command line --------------------------------------------------------


@pytest.mark.slow
def test_a_flag_never_changes_the_verdict_or_a_digest_and_is_read_again_on_a_cache_hit(
    tmp_path, monkeypatch
):
    settings = Settings(backend="local", cache_dir=tmp_path / "cache", retries=0)
    path = EXPLOITS / "rocq" / "control_flagged.v"
    with Checker(settings) as checker:
        flagged = check(checker, path, "rocq")
        assert flagged.verdict is Verdict.PASS and flagged.advisories
        monkeypatch.setattr(advisories, "path_of", lambda prover: tmp_path / f"{prover}.toml")
        cached = check(checker, path, "rocq")
        assert cached.provenance.cached and cached.advisories == []  # the data is gone now
        with Checker(settings.model_copy(update={"cache": False})) as fresh:
            plain = check(fresh, path, "rocq")
    assert plain.advisories == []
    assert (plain.verdict, plain.result_digest, plain.env_key) == (
        flagged.verdict,
        flagged.result_digest,
        flagged.env_key,
    )


@pytest.mark.slow
def test_check_prints_the_flag_in_its_json_line_and_one_count_on_stderr(cli, tmp_path):
    exploit = EXPLOITS / "rocq" / "PL-ROCQ-16957.v"
    control = EXPLOITS / "rocq" / "control.v"
    done = cli("check", "--prover", "rocq", str(exploit), str(control))
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert "PL-ROCQ-16957" in lines[0]["advisories"] and lines[1]["advisories"] == []
    assert [line["verdict"] for line in lines] == ["fail", "pass"]
    counts = [line for line in done.stderr.splitlines() if "advisories apply" in line]
    assert len(counts) == 1 and "; 1 records flagged" in counts[0]


# -- keeping up with the upstream list ---------------------------------------------------------

UPSTREAM_SHAPED = """Compilation of critical bugs
==============================

## Fixed bugs

### Typing constructions

#### guard checker forgot to check non-structural arguments of fixpoint

- component: guard checking
- impacted released versions: V8.16 to V9.0.0
- fixed in: V9.0.1, V9.1.0
- exploit / GH issue: [#20413](https://github.com/rocq-prover/rocq/issues/20413)

#### substitution missing in the body of a let

- component: "match"
- fixed in: master/trunk/v8.5 ([e583a79b5](https://github.com/rocq-prover/rocq/commit/e583a79b5a0298fd08f34305cc876d5117913e95), 22 Nov 2015)
- GH issue number: ?

#### a bug found after our copy was taken

- component: conversion,
  universes
- impacted released versions: V8.16 to V9.3.0
- fixed in: V9.3.1
- GH issue number: rocq-prover/rocq#99999, ocaml/ocaml#13439

#### buffer overflow on large accumulators

- component: VM
- GH issue number: ocaml/ocaml#6385, rocq-prover/rocq#11170
"""


def test_refresh_names_exactly_the_upstream_entries_our_data_lacks(cli, tmp_path):
    upstream = tmp_path / "critical-bugs.md"
    upstream.write_text(UPSTREAM_SHAPED)
    done = cli("advisories", "refresh", "--from", str(upstream), check=1)
    missing = [line for line in done.stdout.splitlines() if line.startswith("missing:")]
    # #20413 by its issue, the let bug by its fixing commit, #11170 by its issue (not OCaml's
    # #6385, nor OCaml's #13439 that happens to share a number with Rocq's #13439).
    assert missing == ["missing: a bug found after our copy was taken (#99999)"]
    assert "3 of 4 upstream entries have an advisory in rocq.toml; 1 missing" in done.stdout
    as_json = json.loads(cli("advisories", "refresh", "--from", str(upstream), "--json").stdout)
    assert as_json["entries"] == 4 and [m["references"] for m in as_json["missing"]] == [["#99999"]]
    upstream.write_text(UPSTREAM_SHAPED.split("#### a bug found")[0])
    assert (
        "2 of 2 upstream entries"
        in cli("advisories", "refresh", "--from", str(upstream), check=0).stdout
    )


@pytest.mark.parametrize("content", [None, "# a title\n\nno entries here\n"])
def test_refresh_on_a_file_that_is_not_the_list_is_bad_input(cli, tmp_path, content):
    upstream = tmp_path / "critical-bugs.md"
    if content is not None:
        upstream.write_text(content)
    done = cli("advisories", "refresh", "--from", str(upstream), check=2)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_every_rocq_advisory_names_one_upstream_entry_or_says_it_has_none():
    from runner.check import upstream_list

    loaded = advisories.load("rocq")
    assert loaded is not None
    for advisory in loaded.advisory:
        named = upstream_list.references(advisory.upstream)
        assert named, f"{advisory.id}: its upstream names no issue, pull request or commit"
    assert not {"PL-ROCQ-UNLISTED-HELDBACK", "PL-ROCQ-UNLISTED-820"} & set(by_id())


# -- found per record ----------------------------------------------------------------------------


# Rocq's own library as this machine's coqc installs it: ordinary, hand-written Rocq.
STDLIB = Path("/usr/lib/ocaml/coq/theories")
PLAIN_PARTS = ("Init", "Lists", "Bool", "Relations", "Wellfounded", "Program")


def test_ordinary_files_carry_no_advisory():
    """Files using none of the features (no nested fixpoints, functors, let-ins in inductives,
    SProp, VM) get no advisory on either line; the sample is the standard library's plain parts
    (52 files with Coq 8.16.1's), where they are installed, and the suite's clean control."""
    files = [EXPLOITS / "rocq" / "control.v"]
    files += sorted(path for part in PLAIN_PARTS for path in (STDLIB / part).glob("*.v"))
    for environment in (
        image("rocq", "prooflock/rocq:8.16.1"),
        image("rocq", "prooflock/rocq-8.20:8.20.1"),
    ):
        for path in files:
            request = CheckRequest(prover="rocq", name=path.name, content=path.read_text())
            assert advisories.flagged(request, environment) == [], path


def test_a_file_using_the_features_of_a_guard_bug_is_flagged_on_the_lines_it_affects():
    nested = (
        "Fixpoint f (n : nat) : nat := (fix g (m : nat) := match m with 0 => n | S k => g k end) n."
    )
    request = CheckRequest(prover="rocq", name="a.v", content=nested)
    on_bookworm = advisories.flagged(request, image("rocq", "prooflock/rocq:8.16.1"))
    on_trixie = advisories.flagged(request, image("rocq", "prooflock/rocq-8.20:8.20.1"))
    assert "PL-ROCQ-20555" in on_bookworm and "PL-ROCQ-21682" not in on_bookworm  # new in 8.20
    assert {"PL-ROCQ-20555", "PL-ROCQ-21682"} <= set(on_trixie)
    plain = CheckRequest(prover="rocq", name="a.v", content=nested.replace("(fix g", "(id"))
    assert advisories.flagged(plain, image("rocq", "prooflock/rocq-8.20:8.20.1")) == []


def test_the_summary_counts_records_per_advisory():
    results = [
        flagged_result(["PL-ROCQ-21051", "PL-ROCQ-21685"]),
        flagged_result(["PL-ROCQ-21051"]),
        flagged_result([]),
    ]
    assert advisories.records_per_advisory(results) == {"PL-ROCQ-21051": 2, "PL-ROCQ-21685": 1}
    line = advisories.summary(results)
    assert line is not None and "2 records flagged (PL-ROCQ-21051 2, PL-ROCQ-21685 1)" in line


def test_let_ins_in_constructors_are_found_typed_or_not_but_named_arguments_are_not():
    def flags(text: str) -> list[str]:
        request = CheckRequest(prover="rocq", name="a.v", content=text + "\nModule M. End M.")
        return advisories.flagged(request, image("rocq", "prooflock/rocq:8.16.1"))

    assert "PL-ROCQ-22387" in flags("Inductive T := c (x : nat) (z : nat := 0).")
    assert "PL-ROCQ-22387" in flags("Inductive I (n := 0) := C (m:=n).")
    named = (
        "Inductive ex (A:Type) (P:A -> Prop) : Prop := ex_intro : forall x:A, P x -> ex (A:=A) P."
    )
    assert "PL-ROCQ-22387" not in flags(named)


def test_lean_records_are_flagged_for_metaprograms_and_compiler_trust_only():
    pinned = image("lean", "prooflock/lean:4.32.0")

    def flags(text: str) -> set[str]:
        return set(
            advisories.flagged(CheckRequest(prover="lean", name="a.lean", content=text), pinned)
        )

    plain = "theorem two : 1 + 1 = 2 := by decide\ninductive T where | a | b\n"
    assert flags(plain) == set()
    assert "PL-LEAN-TRUSTCOMPILER" in flags("theorem big : 2 ^ 20 > 5 := by native_decide")
    meta = "import Lean\nopen Lean Elab Command\nrun_cmd do pure ()\ninductive W where | mk\n"
    assert {"PL-LEAN-14484", "PL-LEAN-14576", "PL-LEAN-14806"} <= flags(meta)
