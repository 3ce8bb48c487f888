"""Forgeries of a published bundle by someone who can write it but holds no key (issue 21), and
what catches each: the statement rebuilt from the log, the requests digest, or the signature.

The bundles are the bundled example's log published afresh (no prover runs): `example` was
checked on docker with locked images, `example-local` on the local backend, from the same
requests.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import orjson
import pytest

from runner.core.models import Verdict
from runner.records.layout import BUNDLE_LOCK, BUNDLE_LOG, SIGNATURE, STATEMENT
from runner.records.signing import load_signer, sign
from runner.storage.s3_url import INDEX_NAME
from tests.helpers import rewrite
from tests.support.forger import (
    patch_log_subject,
    rebuild_statement,
    result_record,
    set_verdict,
    statement_of,
    write_statement,
)
from tests.support.s3_endpoint import endpoint_env, raw_client
from tests.support.signed import EXAMPLES, Key, make_key, published

USER_AXIOM = 4  # request 4 of the example, user_axiom.v: verdict axiom


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Key]:
    root = tmp_path_factory.mktemp("keys")
    return {name: make_key(root, name) for name in ("publisher", "stranger")}


@pytest.fixture
def audit(prooflock):
    def run(source: Path | str, *flags: str) -> tuple[int, dict]:
        """`prooflock audit SOURCE --json FLAGS...`: its exit code and findings."""
        done = prooflock("audit", str(source), "--json", *flags)
        return done.returncode, json.loads(done.stdout)

    return run


def problems(data: dict) -> dict[str, str]:
    """check → detail of every problem (the check is the field that disagrees)."""
    return {f["check"]: f["detail"] for f in data["findings"] if f["status"] == "problem"}


# -- the genuine article ---------------------------------------------------------------------


@pytest.mark.parametrize("example", ["example", "example-local"])
def test_a_fresh_signed_bundle_audits_clean_and_says_who_signed_it(audit, tmp_path, keys, example):
    bundle = published(tmp_path, example, keys["publisher"])
    code, data = audit(bundle, *keys["publisher"].trust(), "--require-signature")
    assert (code, problems(data)) == (0, {})
    assert data["trust"] == f"signed by {keys['publisher'].id} (publisher.key.pub)"
    images = [
        d
        for d in statement_of(bundle)["predicate"]["buildDefinition"]["resolvedDependencies"]
        if d["name"].startswith("prooflock/")
    ]
    assert len(images) == (4 if example == "example" else 0)
    for image in images:
        assert image["uri"] == f"images/sha256-{image['digest']['sha256']}.tar.gz"


# -- a middle record edited, the chain re-hashed, the log subject rewritten -------------------------


def forge_axiom_as_pass(bundle: Path) -> None:
    rewrite(bundle / BUNDLE_LOG, lambda records: set_verdict(records, USER_AXIOM, Verdict.PASS))
    patch_log_subject(bundle)


def test_an_edited_record_with_a_rewritten_log_subject_is_caught_by_its_verdict_counts(
    audit, tmp_path
):
    bundle = published(tmp_path, "example-local")
    forge_axiom_as_pass(bundle)
    code, data = audit(bundle)
    assert code == 1
    assert problems(data).keys() == {"verdict counts"}
    assert problems(data)["verdict counts"] == (
        "axiom: the statement says 3, the log and lock say 2; "
        "pass: the statement says 6, the log and lock say 7"
    )


def test_the_same_edit_with_the_whole_statement_rebuilt_needs_a_signature(audit, tmp_path, keys):
    unsigned = published(tmp_path, "example-local", name="unsigned")
    forge_axiom_as_pass(unsigned)
    rebuild_statement(unsigned)
    code, data = audit(unsigned)
    assert (code, problems(data)) == (0, {})  # without a key, a perfect forgery is consistent
    assert data["trust"] == "unsigned: integrity only, anyone can re-hash it"
    code, data = audit(unsigned, *keys["publisher"].trust(), "--require-signature")
    assert code == 1 and problems(data).keys() == {"signature"}

    signed = published(tmp_path, "example-local", keys["publisher"], name="signed")
    forge_axiom_as_pass(signed)
    rebuild_statement(signed)
    code, data = audit(signed, *keys["publisher"].trust())
    assert code == 1
    assert data["trust"].startswith("not trusted: the signed payload is not statement.intoto.json")
    assert problems(data) == {
        "signature": "the signed payload is not statement.intoto.json: the statement was "
        "changed after signing"
    }


def test_a_forger_who_re_signs_with_their_own_key_is_named_by_key_id(audit, tmp_path, keys):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    forge_axiom_as_pass(bundle)
    rebuild_statement(bundle)
    (bundle / SIGNATURE).write_bytes(
        sign((bundle / STATEMENT).read_bytes(), load_signer(keys["stranger"].private))
    )
    code, data = audit(bundle, *keys["publisher"].trust())
    assert code == 1
    assert problems(data)["signature"] == (
        f"signature does not verify with publisher.key.pub: it claims key id "
        f"{keys['stranger'].id} (a label, not a verified signer)"
    )


# -- the predicate alone edited (no re-hashing needed) ----------------------------------------


def _dependency(statement: dict, name: str) -> dict:
    dependencies = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    return next(d for d in dependencies if d["name"] == name)


PREDICATE_EDITS = {
    "builder": lambda s: s["predicate"]["runDetails"]["builder"].update(
        id="https://prooflock.dev/builder/local"
    ),
    "backends": lambda s: s["predicate"]["buildDefinition"]["internalParameters"].update(
        backends=["local"]
    ),
    "hosts": lambda s: s["predicate"]["runDetails"]["byproducts"][0]["annotations"].update(
        hosts=["ci.example.org"]
    ),
    "kit version": lambda s: s["predicate"]["runDetails"]["builder"]["version"].update(
        prooflock="0.3.0"
    ),
    "requests digest": lambda s: s["predicate"]["buildDefinition"]["externalParameters"][
        "requests"
    ]["digest"].update(sha256="0" * 64),
    "images": lambda s: _dependency(s, "prooflock/rocq:8.16.1").update(
        uri="images/sha256-elsewhere.tar.gz"
    ),
    "image lock entries": lambda s: _dependency(s, BUNDLE_LOCK)["digest"].update(sha256="0" * 64),
}


@pytest.mark.parametrize("field", sorted(PREDICATE_EDITS))
def test_a_predicate_only_edit_is_named_by_its_field(audit, tmp_path, field):
    bundle = published(tmp_path, "example")
    statement = statement_of(bundle)
    PREDICATE_EDITS[field](statement)
    write_statement(bundle, statement)
    code, data = audit(bundle)
    assert code == 1
    assert problems(data).keys() == {field}, problems(data)


def test_a_merged_lock_entry_is_named(audit, tmp_path):
    bundle = published(tmp_path, "example")
    lock = orjson.loads((bundle / BUNDLE_LOCK).read_bytes())
    entry = next(iter(lock["images"].values()))
    entry["inputs"] = {**entry["inputs"], "base": "debian@sha256:" + "1" * 64}
    (bundle / BUNDLE_LOCK).write_bytes(orjson.dumps(lock))
    code, data = audit(bundle)
    assert code == 1
    assert {"images", "image lock entries"} <= problems(data).keys()


# -- a record swapped in from another run -----------------------------------------------------


def swap_in_docker_record(bundle: Path) -> None:
    """Request 0 of the local run replaced by the docker run's record of the same request, the
    docker run's lock merged into the bundle, the chain re-sealed."""
    docker = [orjson.loads(line) for line in (EXAMPLES / "example" / BUNDLE_LOG).open("rb")]
    rewrite(
        bundle / BUNDLE_LOG,
        lambda records: result_record(records, 0).update(body=result_record(docker, 0)["body"]),
    )
    shutil.copy(EXAMPLES / "example" / BUNDLE_LOCK, bundle / BUNDLE_LOCK)


def test_a_swapped_record_is_caught_by_the_environment_the_statement_claims(audit, tmp_path):
    bundle = published(tmp_path, "example-local")
    swap_in_docker_record(bundle)
    patch_log_subject(bundle)
    code, data = audit(bundle)
    assert code == 1
    assert {"backends", "builder", "images", "isolation"} <= problems(data).keys()
    assert "requests digest" not in problems(data)  # the same request: its digest cannot tell


def test_a_swapped_record_with_the_statement_rebuilt_is_caught_by_the_signature(
    audit, tmp_path, keys
):
    bundle = published(tmp_path, "example-local", keys["publisher"])
    swap_in_docker_record(bundle)
    rebuild_statement(bundle)
    code, data = audit(bundle, *keys["publisher"].trust())
    assert code == 1 and problems(data).keys() == {"signature"}


# -- a result dropped, the header's count lowered ---------------------------------------------


def drop_last_result(records: list) -> None:
    records.pop()
    records[0]["body"]["count"] -= 1


def test_a_dropped_result_with_a_lowered_count_is_caught_by_the_requests_digest(
    audit, cli, tmp_path
):
    bundle = published(tmp_path, "example-local")
    rewrite(bundle / BUNDLE_LOG, drop_last_result)
    rebuild_statement(bundle)  # even with every claim of the statement made again
    code, data = audit(bundle)
    assert code == 1
    assert problems(data).keys() == {"requests digest"}
    assert "13 recorded requests" in problems(data)["requests digest"]
    assert cli("verify-log", str(bundle)).returncode == 1


# -- objects replaced in S3-compatible storage --------------------------------------------------


def test_objects_overwritten_in_the_store_are_caught_by_the_signature(
    cli, tmp_path, keys, s3_endpoint, s3_bucket
):
    env = endpoint_env(s3_endpoint)
    url = f"s3://{s3_bucket}/results/run-1"
    bundle = published(tmp_path, "example-local", keys["publisher"])
    assert cli("upload", str(bundle), url, env=env).returncode == 0
    publisher = keys["publisher"].trust()
    assert cli("audit", url, *publisher, "--require-signature", env=env).returncode == 0

    forged = tmp_path / "forged"
    shutil.copytree(bundle, forged)
    forge_axiom_as_pass(forged)
    rebuild_statement(forged)
    # Behind prooflock's back, with plain boto3 and no condition: the forged log and statement
    # under their own digests, and the index over the old one.
    client = raw_client(s3_endpoint)
    index = json.loads(
        client.get_object(Bucket=s3_bucket, Key=f"results/run-1/{INDEX_NAME}")["Body"].read()
    )
    for name in (BUNDLE_LOG, STATEMENT):
        data = (forged / name).read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        client.put_object(Bucket=s3_bucket, Key=f"results/run-1/blobs/sha256/{sha}", Body=data)
        index["files"][name] = {"sha256": sha, "size": len(data)}
    client.put_object(
        Bucket=s3_bucket,
        Key=f"results/run-1/{INDEX_NAME}",
        Body=json.dumps(index, sort_keys=True, separators=(",", ":")).encode(),
    )

    audited = cli("audit", url, "--json", *publisher, env=env)
    assert audited.returncode == 1
    assert problems(json.loads(audited.stdout)) == {
        "signature": "the signed payload is not statement.intoto.json: the statement was "
        "changed after signing"
    }
    downloaded = cli("download", url, "copy", *publisher, env=env)
    assert downloaded.returncode == 1 and "signature" in downloaded.stderr
    assert not (tmp_path / "copy").exists()

    # Overwriting a blob in place (its key no longer names its bytes) is caught on the way down.
    log_key = f"results/run-1/blobs/sha256/{index['files'][BUNDLE_LOG]['sha256']}"
    client.put_object(Bucket=s3_bucket, Key=log_key, Body=(bundle / BUNDLE_LOG).read_bytes())
    damaged = cli("audit", url, *publisher, env=env)
    assert damaged.returncode == 1 and "log.jsonl" in damaged.stderr
    assert damaged.stderr.count("\n") == 1
