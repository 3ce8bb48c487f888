"""Signed bundles as a publisher and a reader use them: keys, envelopes, who is trusted, the bad
input around them, and `verify-log` and `audit` giving one answer for the same damage."""

from __future__ import annotations

import base64
import json
import shutil
import stat
from pathlib import Path

import orjson
import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from runner.core.models import Verdict
from runner.records.layout import BUNDLE_LOG, SIGNATURE, STATEMENT
from tests.helpers import rewrite
from tests.support.forger import set_verdict
from tests.support.signed import EXAMPLES, Key, make_key, published

LOCAL_LOG = EXAMPLES / "example-local" / BUNDLE_LOG


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Key]:
    root = tmp_path_factory.mktemp("keys")
    return {name: make_key(root, name) for name in ("publisher", "stranger")}


def one_line(done) -> bool:
    return done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


# -- keys ---------------------------------------------------------------------------------------


def test_keygen_writes_a_key_only_its_owner_reads_and_never_overwrites_one(cli, tmp_path):
    made = cli("keygen", "--out", "me.key", "--json", check=True)
    key_id = json.loads(made.stdout)["keyid"]
    assert stat.S_IMODE((tmp_path / "me.key").stat().st_mode) == 0o600
    public = load_pem_public_key((tmp_path / "me.key.pub").read_bytes())
    assert SSlibKey.from_crypto(public).keyid == key_id  # the id a reader computes from KEY.pub
    before = (tmp_path / "me.key").read_bytes()
    again = cli("keygen", "--out", "me.key")
    assert again.returncode == 2 and "already exists" in again.stderr and one_line(again)
    assert (tmp_path / "me.key").read_bytes() == before


def test_publish_sign_writes_a_dsse_envelope_of_the_statement_bytes(cli, tmp_path, keys):
    key = keys["publisher"]
    done = cli("publish", str(LOCAL_LOG), "--out", "b", "--sign", str(key.private), check=True)
    assert f"signed by key id {key.id}" in done.stdout
    raw = orjson.loads((tmp_path / "b" / SIGNATURE).read_bytes())
    assert raw["payloadType"] == "application/vnd.in-toto+json"
    assert base64.b64decode(raw["payload"]) == (tmp_path / "b" / STATEMENT).read_bytes()
    assert [s["keyid"] for s in raw["signatures"]] == [key.id]
    # securesystemslib's own verification, with the key read from KEY.pub
    public = SSlibKey.from_crypto(load_pem_public_key(key.public.read_bytes()))
    assert list(Envelope.from_dict(raw).verify([public], 1)) == [key.id]


# -- bad input and who is trusted ------------------------------------------------------------------


def test_a_bundle_checked_with_the_wrong_key_names_that_key_and_the_signers_id(
    prooflock, tmp_path, keys
):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    done = prooflock("audit", str(bundle), *keys["stranger"].trust())
    assert done.returncode == 1
    assert "signature does not verify with stranger.key.pub" in done.stdout
    assert keys["publisher"].id in done.stdout  # the key id that did sign it


def test_a_signature_altered_under_the_right_key_id_does_not_verify(prooflock, tmp_path, keys):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    raw = orjson.loads((bundle / SIGNATURE).read_bytes())
    sig = bytearray(base64.b64decode(raw["signatures"][0]["sig"]))
    sig[0] ^= 1
    raw["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    (bundle / SIGNATURE).write_bytes(orjson.dumps(raw))
    done = prooflock("audit", str(bundle), "--json", *keys["publisher"].trust())
    assert done.returncode == 1
    found = {f["check"]: f["detail"] for f in json.loads(done.stdout)["findings"]}
    assert found["signature"] == "signature does not verify with publisher.key.pub"


def test_a_truncated_envelope_is_bad_input_naming_the_file(prooflock, tmp_path, keys):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    envelope = bundle / SIGNATURE
    envelope.write_bytes(envelope.read_bytes()[:100])
    done = prooflock("audit", str(bundle), *keys["publisher"].trust())
    assert done.returncode == 2 and one_line(done)
    assert f"{envelope}: not a DSSE envelope" in done.stderr


def test_a_private_key_others_can_read_is_refused_with_the_fix(prooflock, tmp_path, keys):
    loose = tmp_path / "loose.key"
    shutil.copy(keys["publisher"].private, loose)
    loose.chmod(0o644)
    done = prooflock("publish", str(LOCAL_LOG), "--out", "b", "--sign", str(loose))
    assert done.returncode == 2 and one_line(done)
    assert f"run `chmod 600 {loose}`" in done.stderr
    assert not (tmp_path / "b").exists()


def test_the_signing_key_can_come_from_the_environment_and_is_never_shown(
    prooflock, tmp_path, keys
):
    pem = keys["publisher"].private.read_text()
    done = prooflock("publish", str(LOCAL_LOG), "--out", "b", env={"PROOFLOCK_SIGNING_KEY": pem})
    assert done.returncode == 0 and keys["publisher"].id in done.stdout
    by_path = {"PROOFLOCK_SIGNING_KEY": str(keys["publisher"].private)}
    assert prooflock("publish", str(LOCAL_LOG), "--out", "c", env=by_path).returncode == 0
    secret = "MC4CAQAwBQYDK2VwBCIEIHiddenSecretMaterial"
    bad = f"-----BEGIN PRIVATE KEY-----\n{secret}\n-----END PRIVATE KEY-----\n"
    refused = prooflock("publish", str(LOCAL_LOG), "--out", "d", env={"PROOFLOCK_SIGNING_KEY": bad})
    assert refused.returncode == 2 and one_line(refused)
    assert "PROOFLOCK_SIGNING_KEY: not an unencrypted PEM private key" in refused.stderr
    assert secret not in refused.stderr + refused.stdout
    headless = prooflock(
        "publish", str(LOCAL_LOG), "--out", "e", env={"PROOFLOCK_SIGNING_KEY": secret}
    )
    assert headless.returncode == 2 and one_line(headless)
    assert "neither a PEM private key nor the path of a key file" in headless.stderr
    assert secret not in headless.stderr + headless.stdout


def test_an_unsigned_bundle_is_integrity_only_unless_a_signature_is_required(
    prooflock, tmp_path, keys
):
    unsigned = published(tmp_path, "example-local", name="unsigned")
    done = prooflock("audit", str(unsigned))
    assert done.returncode == 0
    assert "clean; unsigned: integrity only, anyone can re-hash it" in done.stdout
    required = prooflock("audit", str(unsigned), *keys["publisher"].trust(), "--require-signature")
    assert required.returncode == 1

    signed = published(tmp_path, "example-local", keys["publisher"], name="signed")
    unchecked = prooflock("audit", str(signed))
    assert unchecked.returncode == 0
    assert "clean; signature present, signer not verified: integrity only" in unchecked.stdout
    assert keys["publisher"].id not in unchecked.stdout  # a key id alone names nobody
    trusted = prooflock("audit", str(signed), *keys["publisher"].trust(), "--require-signature")
    assert trusted.returncode == 0
    assert f"clean; signed by {keys['publisher'].id} (publisher.key.pub)" in trusted.stdout


# -- the same damage, the same exit code -------------------------------------------------------------


def _lines(edit):
    def apply(log: Path) -> None:
        lines = log.read_bytes().splitlines(keepends=True)
        log.write_bytes(b"".join(edit(lines)))

    return apply


def _drop_result_and_lower_count(records: list) -> None:
    records.pop()
    records[0]["body"]["count"] -= 1


DAMAGE = {
    "intact": (lambda log: None, 0),
    "an edited record": (_lines(lambda ls: [*ls[:3], ls[3].replace(b"fail", b"pass"), *ls[4:]]), 1),
    "a removed record": (_lines(lambda ls: ls[:4] + ls[5:]), 1),
    "two records swapped": (_lines(lambda ls: [*ls[:4], ls[5], ls[4], *ls[6:]]), 1),
    "the last results cut": (_lines(lambda ls: ls[:-2]), 1),
    "a torn last record": (_lines(lambda ls: [*ls[:-1], ls[-1][:40]]), 1),
    "a re-sealed verdict": (
        lambda log: rewrite(log, lambda r: r[5]["body"]["result"].update(verdict="pass")),
        1,
    ),
    "a re-sealed digest-consistent verdict": (
        lambda log: rewrite(log, lambda r: set_verdict(r, 4, Verdict.PASS)),
        0,
    ),
    "a dropped result, count lowered": (lambda log: rewrite(log, _drop_result_and_lower_count), 1),
    "not a log": (lambda log: log.write_text("these are my notes\n"), 2),
    "empty": (lambda log: log.write_bytes(b""), 2),
}


@pytest.mark.parametrize("where", ["log", "bundle"])
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_verify_log_and_audit_agree_on_the_exit_code_for_the_same_damage(
    prooflock, tmp_path, damage, where
):
    edit, bare_log_code = DAMAGE[damage]
    bundle = published(tmp_path, "example-local")
    edit(bundle / BUNDLE_LOG)
    source = str(bundle / BUNDLE_LOG) if where == "log" else str(bundle)
    codes = {command: prooflock(command, source).returncode for command in ("verify-log", "audit")}
    # In a bundle, the statement also catches what re-sealing hides from the log alone.
    expected = (
        1 if where == "bundle" and bare_log_code == 0 and damage != "intact" else bare_log_code
    )
    assert codes == {"verify-log": expected, "audit": expected}
