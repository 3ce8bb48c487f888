"""Signatures that lie about who made them: a key id in a DSSE envelope is a label its writer
chose, so it never names a signer, and keys are matched to envelopes only by verifying.

The forger can write the whole bundle (and its attached reports) and holds no trusted key: they
re-seal an edited log, rebuild its statement, and sign it with their own key or with garbage,
under whatever key id they copy from the genuine envelope.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import orjson
import pytest

from runner.core.errors import UserError
from runner.core.models import Verdict
from runner.records.attest import write_reproduction
from runner.records.layout import BUNDLE_LOG, SIGNATURE, STATEMENT
from runner.records.signing import load_signer, sign
from runner.records.verify import TrustPolicy
from tests.helpers import rewrite
from tests.support.forger import patch_log_subject, rebuild_statement, set_verdict
from tests.support.signed import Key, make_key, published, summary_of

USER_AXIOM = 4  # request 4 of the example, user_axiom.v: verdict axiom
UNVERIFIED = "signature present, signer not verified: integrity only"


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Key]:
    root = tmp_path_factory.mktemp("keys")
    return {name: make_key(root, name) for name in ("publisher", "replayer", "stranger")}


def audit(prooflock, source: Path, *flags: str) -> tuple[dict, str]:
    """`prooflock audit --json`: its data, and the whole output (to look for key ids)."""
    done = prooflock("audit", str(source), "--json", *flags)
    assert done.returncode == json.loads(done.stdout)["exit_code"], done.stderr
    return json.loads(done.stdout), done.stdout + done.stderr


def trust_problems(data: dict) -> dict[str, str]:
    """The problems found with signatures and reports (each one fails the audit, exit 1); the
    others (say, an adapter newer here than the example's) are not what these tests are about."""
    return {
        f["check"]: f["detail"]
        for f in data["findings"]
        if f["status"] == "problem" and f["check"].split()[0] in ("signature", "reproduction")
    }


def reproductions(data: dict) -> list[str]:
    return [f["detail"] for f in data["findings"] if f["check"].startswith("reproduction ")]


def envelope_of(path: Path) -> dict:
    return orjson.loads(path.read_bytes())


def relabel(envelope: dict, key_id: str) -> dict:
    """Every signature of `envelope` now claims `key_id` (its bytes unchanged)."""
    for signature in envelope["signatures"]:
        signature["keyid"] = key_id
    return envelope


def with_garbage(envelope: dict, key_id: str) -> dict:
    """`envelope` with one more signature: 64 random bytes labelled `key_id`."""
    garbage = base64.b64encode(os.urandom(64)).decode()
    envelope["signatures"].append({"keyid": key_id, "sig": garbage})
    return envelope


def resealed_with_a_flipped_verdict(bundle: Path) -> None:
    """The axiom record made a pass, the chain re-sealed, the statement rebuilt by the kit."""
    rewrite(bundle / BUNDLE_LOG, lambda records: set_verdict(records, USER_AXIOM, Verdict.PASS))
    patch_log_subject(bundle)
    rebuild_statement(bundle)


# -- the bundle's own signature -------------------------------------------------------------------


@pytest.mark.parametrize("signed_with", ["the forger's key", "garbage"])
def test_a_resealed_bundle_under_the_publishers_copied_key_id_names_no_signer(
    prooflock, tmp_path, keys, signed_with
):
    publisher = keys["publisher"]
    bundle = published(tmp_path, "example-local", publisher)
    resealed_with_a_flipped_verdict(bundle)
    if signed_with == "garbage":
        envelope = envelope_of(bundle / SIGNATURE)
        envelope["payload"] = base64.b64encode((bundle / STATEMENT).read_bytes()).decode()
        envelope = with_garbage({**envelope, "signatures": []}, publisher.id)
    else:
        forged = sign((bundle / STATEMENT).read_bytes(), load_signer(keys["stranger"].private))
        envelope = relabel(orjson.loads(forged), publisher.id)
    (bundle / SIGNATURE).write_bytes(orjson.dumps(envelope))

    data, said = audit(prooflock, bundle)
    assert trust_problems(data) == {}  # consistent throughout: integrity only, and it says so
    assert data["trust"] == UNVERIFIED
    assert (data["verified"], data["signed_by"]) == (False, [])
    assert publisher.id not in said  # the copied key id is not shown as if it meant someone
    text = prooflock("audit", str(bundle))
    assert f"; {UNVERIFIED}" in text.stdout and publisher.id not in text.stdout

    data, _ = audit(prooflock, bundle, *publisher.trust())
    assert data["exit_code"] == 1
    assert trust_problems(data) == {"signature": "signature does not verify with publisher.key.pub"}


def test_a_genuine_signature_under_another_label_is_credited_to_the_key_that_made_it(
    prooflock, tmp_path, keys
):
    publisher = keys["publisher"]
    bundle = published(tmp_path, "example-local", publisher)
    envelope = relabel(envelope_of(bundle / SIGNATURE), keys["stranger"].id)
    (bundle / SIGNATURE).write_bytes(orjson.dumps(envelope))

    data, _ = audit(prooflock, bundle, *publisher.trust(), "--require-signature")
    assert trust_problems(data) == {}
    assert data["trust"] == f"signed by {publisher.id} (publisher.key.pub)"
    assert data["signed_by"] == [publisher.id]


def test_a_borrowed_third_partys_key_id_is_called_a_label_not_a_signer(prooflock, tmp_path, keys):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    resealed_with_a_flipped_verdict(bundle)
    forged = sign((bundle / STATEMENT).read_bytes(), load_signer(keys["stranger"].private))
    third_party = keys["replayer"].id  # someone the reader may know, who signed nothing here
    (bundle / SIGNATURE).write_bytes(orjson.dumps(relabel(orjson.loads(forged), third_party)))

    data, said = audit(prooflock, bundle, *keys["publisher"].trust())
    assert trust_problems(data) == {
        "signature": "signature does not verify with publisher.key.pub: it claims key id "
        f"{third_party} (a label, not a verified signer)"
    }
    assert f"signed by key id {third_party}" not in said


# -- reproduction reports ---------------------------------------------------------------------


def attach_report(prooflock, bundle: Path, report: Path) -> None:
    assert prooflock("attach", str(bundle), str(report)).returncode == 0


@pytest.mark.parametrize("planted_on", ["the report", "the bundle"])
def test_a_garbage_signature_under_a_borrowed_key_id_does_not_make_a_report_the_publishers(
    prooflock, tmp_path, keys, planted_on
):
    publisher, replayer = keys["publisher"], keys["replayer"]
    bundle = published(tmp_path, "example-local", publisher)
    report = tmp_path / "r.json"
    write_reproduction(summary_of(bundle, "alice@lab"), report, load_signer(replayer.private))
    if planted_on == "the report":  # it now claims the publisher signed it too
        report.write_bytes(orjson.dumps(with_garbage(envelope_of(report), publisher.id)))
    else:  # the bundle now claims the replayer signed it too
        envelope = with_garbage(envelope_of(bundle / SIGNATURE), replayer.id)
        (bundle / SIGNATURE).write_bytes(orjson.dumps(envelope))
    attach_report(prooflock, bundle, report)

    data, _ = audit(prooflock, bundle, *publisher.trust(), *replayer.trust())
    assert trust_problems(data) == {}
    assert reproductions(data) == [
        f"independently reproduced by {replayer.id} (replayer.key.pub) (verifier 'alice@lab'): "
        "14/14 records match on local on lab, the recorded environment"
    ]
    assert data["reproductions"][0]["independent"] is True


def test_a_report_under_a_copied_key_id_names_no_signer_and_fails_with_the_key(
    prooflock, tmp_path, keys
):
    replayer = keys["replayer"]
    bundle = published(tmp_path, "example-local", keys["publisher"])
    report = tmp_path / "r.json"
    write_reproduction(
        summary_of(bundle, "alice@lab"), report, load_signer(keys["stranger"].private)
    )
    report.write_bytes(orjson.dumps(relabel(envelope_of(report), replayer.id)))
    attach_report(prooflock, bundle, report)

    data, said = audit(prooflock, bundle)
    assert trust_problems(data) == {}
    assert reproductions(data) == [
        f"report by verifier 'alice@lab', {UNVERIFIED}; 14/14 records match on local on lab, "
        "the recorded environment"
    ]
    assert replayer.id not in said and keys["stranger"].id not in said
    assert data["reproductions"][0]["independent"] is False

    data, _ = audit(prooflock, bundle, *keys["publisher"].trust(), *replayer.trust())
    # It claims a trusted key that did not make it: damage (exit 1).
    assert [check.split()[0] for check in trust_problems(data)] == ["reproduction"]
    assert data["exit_code"] == 1
    [sentence] = reproductions(data)
    assert sentence.startswith(
        "report by verifier 'alice@lab', not trusted: signature does not verify with "
        "replayer.key.pub"
    )


# -- asking for a signature with nothing to verify it -----------------------------------------------


@pytest.mark.parametrize("command", ["audit", "report", "download"])
def test_require_signature_without_a_trusted_key_is_a_usage_error(
    prooflock, tmp_path, keys, command
):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    argv = {
        "audit": ["audit", str(bundle)],
        "report": ["report", str(bundle), "--out", "html"],
        "download": ["download", "s3://bucket/run-1", "copy"],
    }[command]
    unreachable = {  # were the flags not refused first, the download would fail with exit 3
        "PROOFLOCK_S3_ENDPOINT_URL": "http://127.0.0.1:9",
        "PROOFLOCK_S3_ACCESS_KEY_ID": "k",
        "PROOFLOCK_S3_SECRET_ACCESS_KEY": "s",
        "PROOFLOCK_S3_MAX_ATTEMPTS": "1",
    }
    done = prooflock(*argv, "--require-signature", env=unreachable)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "--require-signature needs --trust KEY.pub" in done.stderr
    assert not (tmp_path / "html").exists() and not (tmp_path / "copy").exists()


def test_a_policy_that_requires_a_signature_and_trusts_no_key_cannot_be_made():
    with pytest.raises(UserError, match="needs --trust"):
        TrustPolicy(require_signature=True)
