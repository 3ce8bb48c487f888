"""Bundle upload and download throughput to an S3 endpoint on loopback (numbers to report).

    python benchmarks/s3_throughput.py [--mib 64] [--part-mib 16] [--runs 3]

Starts moto's server in its own process on 127.0.0.1, publishes a bundle of `--mib` MiB (one
large file in parts, the rest as 1 MiB files), publishes it again (everything skipped), downloads
it, and prints the median of `--runs` as a markdown table. boto3's own managed transfer of the
same large file is the reference row. moto keeps objects in memory and hashes them in Python, so
the numbers say more about the client's overhead than about a real store.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from runner.storage import S3Settings, download_bundle, upload_bundle
from runner.storage.s3_settings import MiB, make_client

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


@contextmanager
def moto_server() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def make_bundle(root: Path, total_mib: int) -> Path:
    bundle = root / "bundle"
    (bundle / "blobs" / "sha256").mkdir(parents=True)
    small = min(16, total_mib // 4)
    for index in range(small):
        (bundle / "blobs" / "sha256" / f"file-{index:02d}").write_bytes(os.urandom(MiB))
    (bundle / "big.bin").write_bytes(os.urandom((total_mib - small) * MiB))
    return bundle


def one_run(
    client: S3Client, settings: S3Settings, bundle: Path, scratch: Path
) -> dict[str, float]:
    bucket = f"bench-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/bundle"
    seconds: dict[str, float] = {}
    started = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal started
        seconds[name] = time.perf_counter() - started
        started = time.perf_counter()

    upload_bundle(bundle, url, settings=settings)
    lap("upload_bundle (new)")
    upload_bundle(bundle, url, settings=settings)
    lap("upload_bundle (again: hash + HEAD, nothing sent)")
    download_bundle(url, scratch / f"copy-{bucket}", settings=settings)
    lap("download_bundle (verified)")
    client.upload_file(str(bundle / "big.bin"), bucket, "reference/big.bin")
    lap("boto3 upload_file, big file only (reference)")
    client.download_file(bucket, "reference/big.bin", str(scratch / f"reference-{bucket}"))
    lap("boto3 download_file, big file only (reference)")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="bundle size in MiB")
    parser.add_argument("--part-mib", type=int, default=16, help="multipart part size in MiB")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    rows: dict[str, list[float]] = {}
    with moto_server() as endpoint, tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        bundle = make_bundle(root, args.mib)
        big_mib = (bundle / "big.bin").stat().st_size / MiB
        settings = S3Settings(
            endpoint_url=endpoint,
            access_key_id=SecretStr("bench"),
            secret_access_key=SecretStr("bench-secret"),
            multipart_threshold_mb=args.part_mib,
            part_size_mb=args.part_mib,
        )
        client = make_client(settings)
        for _ in range(args.runs):
            for name, seconds in one_run(client, settings, bundle, root).items():
                rows.setdefault(name, []).append(seconds)

    print(f"bundle: {args.mib} MiB, parts of {args.part_mib} MiB, median of {args.runs} runs\n")
    print("| operation | MiB | seconds | MiB/s |")
    print("| --- | ---: | ---: | ---: |")
    for name, samples in rows.items():
        mib = big_mib if "reference" in name else args.mib
        seconds = statistics.median(samples)
        print(f"| {name} | {mib:.0f} | {seconds:.2f} | {mib / seconds:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
