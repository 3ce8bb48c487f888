"""Published bundles: publish → audit → replay, the in-toto statement, and every way to break one."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import orjson
import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement

from runner.records.publish import STATEMENT, publish
from tests.helpers import rewrite
from tests.support.finished_run import NAMES
from tests.support.s3_endpoint import endpoint_env


@pytest.fixture
def bundle(finished_run, tmp_path) -> Path:
    return publish(finished_run, tmp_path / "bundle").path


def audit_json(cli, source: str, *options: str) -> dict:
    done = cli("audit", source, "--json", *options)
    data = json.loads(done.stdout)
    assert data["exit_code"] == done.returncode, done.stderr
    return data


def problems(data: dict) -> list[str]:
    return [f["check"] + ": " + f["detail"] for f in data["findings"] if f["status"] == "problem"]


def test_statement_is_an_in_toto_statement_with_an_slsa_provenance_predicate(bundle, finished_run):
    raw = (bundle / STATEMENT).read_text()
    parsed = json_format.Parse(raw, statement_pb2.Statement())
    Statement.copy_from_pb(parsed).validate()  # in-toto's own validation
    predicate = json_format.ParseDict(json.loads(raw)["predicate"], provenance_pb2.Provenance())
    assert predicate.build_definition.build_type.startswith("https://")
    assert predicate.run_details.builder.id.endswith("/local")
    log_subject = parsed.subject[0]
    assert log_subject.name == "log.jsonl"
    records = finished_run.read_bytes().count(b"\n")
    assert log_subject.annotations["records"] == records
    assert [s.name for s in parsed.subject[1:]] == [
        f"artifact/{i}/{n}" for i, n in enumerate(NAMES)
    ]
    dependencies = {d.name for d in predicate.build_definition.resolved_dependencies}
    assert "prooflock" in dependencies


def test_a_clean_bundle_audits_clean_and_replays(cli, bundle):
    data = audit_json(cli, str(bundle))
    assert data["clean"] and data["results"] == len(NAMES), problems(data)
    replayed = cli("replay", str(bundle), "--json", "--no-cache")
    assert replayed.returncode == 0, replayed.stdout
    assert json.loads(replayed.stdout)["matched"] == len(NAMES)


@pytest.mark.parametrize("name", ["example", "example-local"])
def test_the_bundled_examples_audit_clean_with_every_request_recorded(cli, name):
    """What `nox -s reproduce` replays: stale after an adapter version bump or a re-lock."""
    manifests = Path(__file__).parent.parent / "manifests"
    example = manifests / "results" / name
    requests = (example.parent / "example-requests.jsonl").read_text().splitlines()
    key = manifests / "keys" / "example.pub"
    data = audit_json(cli, str(example), "--trust", str(key), "--require-signature")
    assert data["clean"], problems(data)
    assert data["results"] == len(requests)


def test_a_tar_bundle_is_reproducible_and_audits_clean(cli, finished_run, tmp_path):
    first = publish(finished_run, tmp_path / "a.tar").path
    second = publish(finished_run, tmp_path / "b.tar").path
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        assert "statement.intoto.json" in tar.getnames()
    assert audit_json(cli, str(first))["clean"]


def test_a_cut_log_is_caught_by_the_statement(cli, bundle):
    lines = (bundle / "log.jsonl").read_bytes().splitlines(keepends=True)
    (bundle / "log.jsonl").write_bytes(b"".join(lines[:3]))
    data = audit_json(cli, str(bundle))
    assert data["exit_code"] == 1
    assert any(p.startswith("head: the statement says") for p in problems(data))
    replayed = cli("replay", str(bundle), "--no-cache")
    assert replayed.returncode == 1 and "statement:" in replayed.stdout


def test_a_rehashed_log_passes_its_own_chain_but_not_its_digests_or_the_statement(cli, bundle):
    def flip_verdict(records):  # to another verdict, whichever check finished last
        result = records[-1]["body"]["result"]
        result["verdict"] = "fail" if result["verdict"] == "pass" else "pass"

    rewrite(bundle / "log.jsonl", flip_verdict)
    verified = cli("verify-log", str(bundle / "log.jsonl"))
    assert verified.returncode == 1 and "chain intact" in verified.stdout
    assert "PROBLEM digests: 1 records do not match their own digests" in verified.stdout
    data = audit_json(cli, str(bundle))
    found = problems(data)
    assert any(p.startswith("head: ") for p in found)
    assert any("do not match their own digests" in p for p in found)


def test_a_missing_or_altered_blob_is_named(cli, bundle):
    blobs = sorted((bundle / "blobs" / "sha256").iterdir())
    blobs[0].unlink()
    blobs[1].write_bytes(b"not what the name says")
    found = problems(audit_json(cli, str(bundle)))
    assert any("missing" in p for p in found) and any("do not match its name" in p for p in found)


def test_a_statement_from_another_log_does_not_anchor_this_one(cli, bundle, tmp_path, finished_run):
    other_log = tmp_path / "other.jsonl"
    shutil.copy(finished_run, other_log)

    def drop_last(records):
        del records[-1]

    rewrite(other_log, drop_last)
    with pytest.raises(Exception, match="unfinished"):  # an unfinished run is not published
        publish(other_log, tmp_path / "other")
    statement = orjson.loads((bundle / STATEMENT).read_bytes())
    statement["subject"][0]["digest"]["sha256"] = "0" * 64
    (bundle / STATEMENT).write_bytes(orjson.dumps(statement))
    assert any(p.startswith("log sha256: ") for p in problems(audit_json(cli, str(bundle))))


def test_bad_sources_are_one_line_and_exit_2(cli, tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "notabundle").mkdir()
    for source in ("empty.jsonl", "notabundle", "missing.jsonl"):
        for command in ("audit", "verify-log", "replay"):
            done = cli(command, source)
            assert done.returncode == 2, (command, source, done.stderr)
            assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_publish_refuses_an_existing_destination_and_writes_nothing_half(
    cli, finished_run, tmp_path
):
    (tmp_path / "taken").mkdir()
    done = cli("publish", str(finished_run), "--out", str(tmp_path / "taken"))
    assert done.returncode == 2 and "already exists" in done.stderr
    assert list((tmp_path / "taken").iterdir()) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".taken")]


# -- through S3-compatible storage (moto's real HTTP server on loopback) -------------------------


def test_publish_upload_download_audit_replay_as_the_readme_shows(
    cli, finished_run, tmp_path, s3_endpoint, s3_bucket
):
    env = endpoint_env(s3_endpoint)
    url = f"s3://{s3_bucket}/results/run-1"
    assert cli("publish", str(finished_run), "--out", "bundle", env=env).returncode == 0
    uploaded = cli("upload", "bundle", url, env=env)
    assert uploaded.returncode == 0, uploaded.stderr
    again = cli("upload", "bundle", url, "--json", env=env)  # write-once: nothing sent twice
    assert json.loads(again.stdout)["uploaded"] == 0
    assert cli("download", url, "copy", env=env).returncode == 0
    assert audit_json(cli, "copy")["clean"]
    direct = cli("audit", url, "--json", env=env)  # an s3:// source directly
    assert direct.returncode == 0 and json.loads(direct.stdout)["clean"]
    replayed = cli("replay", url, "--no-cache", env=env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_storage_trouble_is_one_line_with_the_right_exit_code(
    cli, finished_run, s3_endpoint, tmp_path
):
    env = endpoint_env(s3_endpoint)
    assert cli("publish", str(finished_run), "--out", "bundle", env=env).returncode == 0
    missing_bucket = cli("upload", "bundle", "s3://no-such-bucket-here/x", env=env)
    assert missing_bucket.returncode == 2 and "does not exist" in missing_bucket.stderr
    closed = {**env, "PROOFLOCK_S3_ENDPOINT_URL": "http://127.0.0.1:9"}
    unreachable = cli("download", "s3://some-bucket/x", "copy", env=closed)
    assert unreachable.returncode == 3 and not (tmp_path / "copy").exists()
    for done in (missing_bucket, unreachable):
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
