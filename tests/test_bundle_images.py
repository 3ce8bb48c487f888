"""A bundle that carries its images: `publish --with-images` writes each image the records used as
`images/sha256-<ID>.tar.gz`, listed in the statement; `audit` checks the listed bytes; `upload`
carries them under their own name; `replay` and `audit --rebuild` load a missing image from the
bundle's own store (its directory or its s3:// location), and refuse a damaged archive.

The records are a real local Rocq run, re-sealed as if checked on a tiny one-file image made here
(a prover replay needs a real prover image; the prooflock/* images are never removed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from runner.core.canonical import digest
from runner.images.archives import archive_name
from runner.images.state import image_id_of
from runner.records.bundles import load_missing_images, open_source
from runner.records.checkpoint import recorded_runs
from runner.records.layout import STATEMENT
from runner.runs.replay import load_recorded, replay
from runner.storage.s3_settings import load_s3_settings
from tests.helpers import rewrite
from tests.support.finished_run import NAMES
from tests.support.s3_endpoint import endpoint_env, raw_client
from tests.support.tiny_image import remove

pytestmark = [pytest.mark.docker]
TAG = "prooflock-test/tiny:1"


@pytest.fixture
def docker_run(finished_run, tiny_image, tmp_path) -> Path:
    """The finished run's log, every record re-sealed as checked on the tiny image."""
    log = tmp_path / "docker-run.jsonl"
    shutil.copy(finished_run, log)

    def on_the_tiny_image(records):
        for record in records:
            if record["kind"] == "result":
                result = record["body"]["result"]
                result["environment"]["install"] = {
                    "kind": "docker",
                    "image": TAG,
                    "image_id": tiny_image,
                }
                result["env_key"] = digest(result["environment"])

    rewrite(log, on_the_tiny_image)
    return log


def published(cli, log: Path, out: str, *flags: str) -> dict:
    done = cli("publish", str(log), "--out", out, "--with-images", "--json", *flags)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def audit(cli, source: str, *flags: str, env: dict | None = None) -> dict:
    done = cli("audit", source, "--json", *flags, env=env)
    return json.loads(done.stdout)


def findings(data: dict, check: str) -> list[tuple[str, str]]:
    return [(f["status"], f["detail"]) for f in data["findings"] if f["check"] == check]


def results_of(bundle: Path) -> list:
    _, runs = load_recorded(bundle / "log.jsonl")
    return [result for _, result in runs]


def test_publish_with_images_writes_each_archive_once_listed_and_audit_checks_it(
    cli, docker_run, tiny_image, tmp_path
):
    data = published(cli, docker_run, "bundle")
    name = f"images/{archive_name(tiny_image)}"
    archive = tmp_path / "bundle" / name
    assert list((tmp_path / "bundle" / "images").iterdir()) == [archive]  # 4 records, 1 image
    listed = data["archives"][name]
    assert listed["size"] == archive.stat().st_size
    statement = orjson.loads((tmp_path / "bundle" / STATEMENT).read_bytes())
    image = next(
        d
        for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]
        if d["name"] == TAG
    )
    assert image["uri"] == name and image["annotations"]["archive"] == listed

    found = audit(cli, "bundle")
    assert findings(found, "image archives") == [
        ("ok", "1 listed, each present with the bytes the statement lists")
    ]
    assert findings(found, "statement")[0][0] == "ok"


def test_a_local_run_has_no_image_to_bundle_and_says_so(cli, finished_run, tmp_path):
    done = cli("publish", str(finished_run), "--out", "bundle", "--with-images")
    assert done.returncode == 0, done.stderr
    assert "no image to bundle" in done.stderr
    assert not (tmp_path / "bundle" / "images").exists()


def test_a_tampered_archive_is_named_by_audit_and_refused_when_loading(
    cli, client, docker_run, tiny_image, tmp_path
):
    published(cli, docker_run, "bundle")
    bundle = tmp_path / "bundle"
    archive = bundle / "images" / archive_name(tiny_image)
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))

    found = audit(cli, "bundle")
    assert found["exit_code"] == 1
    ((status, detail),) = findings(found, "image archives")
    assert status == "problem" and "damaged or replaced" in detail and archive.name in detail

    remove(client, tiny_image)
    said: list[str] = []
    assert load_missing_images(results_of(bundle), [str(bundle)], said.append) == []
    assert len(said) == 1 and said[0].startswith(f"{TAG}: refused the bundle's archive")
    assert str(archive) in said[0]
    assert image_id_of(client, tiny_image) is None

    archive.unlink()
    ((status, detail),) = findings(audit(cli, "bundle"), "image archives")
    assert status == "problem" and "listed in the statement, missing from the bundle" in detail


class RecordedAgain:
    """A checker that answers each request with its recorded result (a prover replay needs a real
    prover image): what matters here is what replay does before it checks anything."""

    def __init__(self, log: Path, said: list[str]):
        self.settings = SimpleNamespace(backend="docker")
        self.notify = said.append
        self.results = [result for _, result in recorded_runs(load_recorded(log)[0].records)]

    def prepare(self, request):
        return request

    def map_unordered(self, work):
        return [(index, self.results[index]) for index, _ in work]


def test_replay_and_audit_rebuild_load_a_missing_image_from_the_bundle(
    cli, client, docker_run, tiny_image, tmp_path
):
    published(cli, docker_run, "bundle")
    bundle = tmp_path / "bundle"
    remove(client, tiny_image)
    said: list[str] = []

    report = replay(bundle / "log.jsonl", RecordedAgain(bundle / "log.jsonl", said), bundle=bundle)

    assert said == [f"{TAG}: loaded {tiny_image} from the bundle's archive"]
    assert image_id_of(client, tiny_image) == tiny_image
    assert report.matched == len(NAMES) and not report.unanchored

    remove(client, tiny_image)
    found = audit(cli, "bundle", "--rebuild")
    assert ("note", f"{TAG}: loaded {tiny_image} from the bundle's archive") in findings(
        found, "image archives"
    )
    assert [i["present_here"] for i in found["images"]] == [True]


def test_upload_carries_the_archives_and_replay_from_s3_fetches_them(
    cli, client, docker_run, tiny_image, tmp_path, s3_endpoint, s3_bucket, monkeypatch
):
    env = endpoint_env(s3_endpoint)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    url = f"s3://{s3_bucket}/results/run-1"
    published(cli, docker_run, "bundle")
    name = f"images/{archive_name(tiny_image)}"
    assert cli("upload", "bundle", url, env=env).returncode == 0
    again = cli("upload", "bundle", url, "--json", env=env)
    assert json.loads(again.stdout)["uploaded"] == 0  # write-once: nothing sent twice
    stored = raw_client(s3_endpoint).get_object(Bucket=s3_bucket, Key=f"results/run-1/{name}")
    assert stored["Body"].read() == (tmp_path / "bundle" / name).read_bytes()

    remove(client, tiny_image)
    said: list[str] = []
    s3 = load_s3_settings()
    with open_source(url, s3=s3) as source:  # as `replay s3://…` opens it: archives left in S3
        assert not (source.bundle / "images").exists()
        loaded = load_missing_images(results_of(source.bundle), source.stores, said.append, s3)
    assert loaded == [tiny_image] and image_id_of(client, tiny_image) == tiny_image
    assert said == [f"{TAG}: loaded {tiny_image} from the bundle's archive"]

    assert cli("download", url, "copy", env=env).returncode == 0
    assert (tmp_path / "copy" / name).read_bytes() == (tmp_path / "bundle" / name).read_bytes()
    for source in ("copy", url):
        ((status, _),) = findings(audit(cli, source, env=env), "image archives")
        assert status == "ok"
