"""Reproduction reports: someone replays a published bundle, signs what they found, attaches it,
and a stranger's audit says who reproduced the result and whether that is someone they trust."""

from __future__ import annotations

import base64
import json

import orjson
import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement

from runner.records.attest import write_reproduction
from runner.records.layout import ATTESTATIONS, BUNDLE_LOG, STATEMENT
from runner.records.signing import load_signer
from runner.records.statement import sha256
from tests.support.signed import Key, make_key, published, summary_of


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Key]:
    root = tmp_path_factory.mktemp("keys")
    return {name: make_key(root, name) for name in ("publisher", "replayer")}


def reproductions(done) -> list[str]:
    assert done.returncode == json.loads(done.stdout)["exit_code"], done.stderr
    data = json.loads(done.stdout)
    return [f["detail"] for f in data["findings"] if f["check"].startswith("reproduction ")]


def test_a_reproduction_report_is_an_in_toto_statement_with_an_slsa_vsa(tmp_path):
    bundle = published(tmp_path, "example-local")
    out = write_reproduction(summary_of(bundle, "alice@lab"), tmp_path / "r.json")
    raw = out.read_text()
    Statement.copy_from_pb(json_format.Parse(raw, statement_pb2.Statement())).validate()
    made = json.loads(raw)
    assert made["predicateType"] == "https://slsa.dev/verification_summary/v1"
    predicate = dict(made["predicate"])
    # The SLSA spec makes verifiedLevels an array; in-toto-attestation 0.9.3's binding a string.
    assert predicate.pop("verifiedLevels") == ["PROOFLOCK_REPLAY_MATCH"]
    vsa = json_format.ParseDict(
        predicate, vsa_pb2.VerificationSummary(), ignore_unknown_fields=True
    )
    assert (vsa.verifier.id, vsa.verification_result) == ("alice@lab", "PASSED")
    statement_sha = sha256((bundle / STATEMENT).read_bytes())
    assert vsa.input_attestations[0].digest["sha256"] == statement_sha
    assert made["subject"][0]["digest"]["sha256"] == sha256((bundle / BUNDLE_LOG).read_bytes())
    assert made["predicate"]["prooflockReplay"]["matched"] == 14


def test_audit_credits_an_independent_reproduction_only_to_a_trusted_key(prooflock, tmp_path, keys):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    signer = load_signer(keys["replayer"].private)
    write_reproduction(summary_of(bundle, "alice@lab"), tmp_path / "r.json", signer)
    attached = prooflock("attach", str(bundle), "r.json")
    assert attached.returncode == 0 and f"{ATTESTATIONS}/" in attached.stdout

    both = (*keys["publisher"].trust(), *keys["replayer"].trust())
    done = prooflock("audit", str(bundle), "--json", *both)
    assert done.returncode == 0
    assert reproductions(done) == [
        f"independently reproduced by {keys['replayer'].id} (replayer.key.pub) (verifier "
        "'alice@lab'): 14/14 records match on local on lab, the recorded environment"
    ]
    assert json.loads(done.stdout)["reproductions"][0]["independent"] is True

    done = prooflock("audit", str(bundle), "--json", *keys["publisher"].trust())
    assert done.returncode == 0  # an untrusted report is said, not counted against the bundle
    [said] = reproductions(done)
    assert said.startswith("report by verifier 'alice@lab', not trusted: signature does not ")
    assert keys["replayer"].id in said
    assert json.loads(done.stdout)["reproductions"][0]["independent"] is False


def test_unsigned_own_key_and_failed_reports_are_told_apart(prooflock, tmp_path, keys):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    publisher, replayer = (load_signer(keys[n].private) for n in ("publisher", "replayer"))
    write_reproduction(summary_of(bundle, "bob@home"), tmp_path / "unsigned.json")
    write_reproduction(summary_of(bundle, "publisher@ci"), tmp_path / "own.json", publisher)
    failed = summary_of(bundle, "carol@uni", differ={4: "pass"})
    write_reproduction(failed, tmp_path / "failed.json", replayer)
    for name in ("unsigned", "own", "failed"):
        assert prooflock("attach", str(bundle), f"{name}.json").returncode == 0

    both = (*keys["publisher"].trust(), *keys["replayer"].trust())
    said = sorted(reproductions(prooflock("audit", str(bundle), "--json", *both)))
    assert said == sorted(
        [
            "unsigned report by verifier 'bob@home': integrity only, anyone could have written "
            "it; 14/14 records match on local on lab, the recorded environment",
            f"reproduced by the publisher's own key {keys['publisher'].id} (publisher.key.pub) "
            "(verifier 'publisher@ci'), not independently; 14/14 records match on local on lab, "
            "the recorded environment",
            f"{keys['replayer'].id} (replayer.key.pub) (verifier 'carol@uni') could not "
            "reproduce it: 13/14 records match on local on lab, the recorded environment; "
            "differ: #4 user_axiom.v (verdict differs)",
        ]
    )


def test_a_reproduction_on_a_drifted_environment_passes_at_its_own_level(prooflock, tmp_path, keys):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    drift = ["install.packages.coq: 8.16.1 → 8.16.2"]
    summary = summary_of(bundle, "dave@lab", drift=drift)
    write_reproduction(summary, tmp_path / "d.json", load_signer(keys["replayer"].private))
    made = json.loads(base64.b64decode(orjson.loads((tmp_path / "d.json").read_bytes())["payload"]))
    assert made["predicate"]["verificationResult"] == "PASSED"
    assert made["predicate"]["verifiedLevels"] == ["PROOFLOCK_REPLAY_SAME_RESULTS"]
    assert prooflock("attach", str(bundle), "d.json").returncode == 0
    both = (*keys["publisher"].trust(), *keys["replayer"].trust())
    [said] = reproductions(prooflock("audit", str(bundle), "--json", *both))
    assert said.startswith(
        f"independently reproduced on a drifted environment by {keys['replayer'].id} "
        "(replayer.key.pub) (verifier 'dave@lab'): 14/14 verdicts and results match on local on "
        "lab, environment differs (install.packages.coq: 8.16.1 → 8.16.2)"
    )


def test_a_report_on_another_log_is_refused_and_a_forged_one_is_damage(prooflock, tmp_path, keys):
    bundle = published(tmp_path, "example-local", keys["publisher"], name="local")
    other = published(tmp_path, "example", name="docker")
    write_reproduction(summary_of(other, "alice@lab"), tmp_path / "other.json")
    refused = prooflock("attach", str(bundle), "other.json")
    assert refused.returncode == 2 and "reports on another log" in refused.stderr
    (bundle / ATTESTATIONS).mkdir()
    (bundle / ATTESTATIONS / "other.json").write_bytes((tmp_path / "other.json").read_bytes())
    done = prooflock("audit", str(bundle), "--json")
    assert done.returncode == 1
    assert reproductions(done) == [
        "damaged: it reports on another log (its subject's sha256 is not this log's)"
    ]

    (bundle / ATTESTATIONS / "other.json").unlink()
    signer = load_signer(keys["replayer"].private)
    forged = tmp_path / "forged.json"
    write_reproduction(summary_of(bundle, "alice@lab", differ={4: "pass"}), forged, signer)
    envelope = orjson.loads(forged.read_bytes())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload["predicate"]["verificationResult"] = "PASSED"  # the failure edited away
    envelope["payload"] = base64.b64encode(orjson.dumps(payload)).decode()
    (bundle / ATTESTATIONS / "forged.json").write_bytes(orjson.dumps(envelope))
    done = prooflock("audit", str(bundle), "--json", *keys["replayer"].trust())
    assert done.returncode == 1
    [said] = reproductions(done)
    assert "not trusted: signature does not verify with replayer.key.pub" in said


# -- a real replay ------------------------------------------------------------------------------


def test_replay_attest_sign_writes_a_report_that_audit_credits(cli, finished_run, keys):
    publisher = str(keys["publisher"].private)
    cli("publish", str(finished_run), "--out", "bundle", "--sign", publisher, check=True)
    lonely = cli("replay", "bundle", "--sign", str(keys["replayer"].private))
    assert lonely.returncode == 2 and "give --attest OUT.json too" in lonely.stderr

    env = {"PROOFLOCK_VERIFIER_ID": "replayer@lab"}
    replayer = str(keys["replayer"].private)
    done = cli("replay", "bundle", "--no-cache", "--attest", "r.json", "--sign", replayer, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"signed by key id {keys['replayer'].id}" in done.stderr
    cli("attach", "bundle", "r.json", check=True)
    audited = cli(
        "audit", "bundle", "--json", *keys["publisher"].trust(), *keys["replayer"].trust()
    )
    [said] = reproductions(audited)
    assert said.startswith(
        f"independently reproduced by {keys['replayer'].id} (replayer.key.pub) (verifier "
        "'replayer@lab'): 4/4 records match on local on "
    )
    assert audited.returncode == 0
