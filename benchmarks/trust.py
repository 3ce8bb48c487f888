"""What trust costs: signing and verifying a statement, and publishing and auditing a bundle of
1,000 records (synthetic: the bundled example's local results, renamed, written through the real
checkpoint writer, so every digest is a real one).

    python benchmarks/trust.py [--records 1000] [--rounds 3]     (or: nox -s bench -- trust)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from runner.core.canonical import digest
from runner.records.bundles import Source
from runner.records.checkpoint import CheckpointLog, inspect_chain, recorded_runs
from runner.records.layout import SIGNATURE, STATEMENT
from runner.records.publish import publish
from runner.records.signing import (
    check_signatures,
    generate_key,
    load_public,
    load_signer,
    read_envelope,
    sign,
)
from runner.records.verify import TrustPolicy, verify_bundle

EXAMPLE_LOG = Path(__file__).resolve().parent.parent / "manifests/results/example-local/log.jsonl"


def synthetic_log(path: Path, records: int) -> Path:
    """`records` results cycled from the example's, each under its own name and request digest."""
    chain = inspect_chain(EXAMPLE_LOG)
    runs = list(recorded_runs(chain.records))
    made = []
    for index in range(records):
        request, result = runs[index % len(runs)]
        request = request.model_copy(update={"name": f"{index:04d}-{request.name}"})
        result = result.model_copy(
            update={"artifact": request.name, "request_digest": request.digest()}
        )
        made.append((request, result))
    header = {
        **(chain.header or {}),
        "count": records,
        "requests": digest([request.digest() for request, _ in made]),
    }
    with CheckpointLog(path, fsync_every=records) as log:
        log.append("header", header)
        for index, (request, result) in enumerate(made):
            log.append(
                "result",
                {
                    "index": index,
                    "request": request.record(),
                    "result": result.model_dump(mode="json"),
                },
            )
    return path


def median_s(action: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(records: int, rounds: int) -> list[str]:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        log = synthetic_log(root / "run.jsonl", records)
        key = generate_key(root / "k.key")
        signer = load_signer(root / "k.key")
        trust = TrustPolicy((load_public(root / "k.key.pub"),), require_signature=True)
        counter = iter(range(10_000))

        def publish_signed() -> object:
            return publish(log, root / f"b{next(counter)}", signer=signer)

        unsigned_s = median_s(lambda: publish(log, root / f"u{next(counter)}"), rounds)
        signed_s = median_s(publish_signed, rounds)
        bundle = publish_signed().path
        payload = (bundle / STATEMENT).read_bytes()
        envelope = read_envelope((bundle / SIGNATURE).read_bytes(), "envelope")
        sign_ms = median_s(lambda: sign(payload, signer), 50) * 1000
        verify_ms = median_s(lambda: check_signatures(envelope, list(trust.keys)), 50) * 1000
        verify_s = median_s(lambda: verify_bundle(bundle, trust).require(), rounds)
        from runner.records.audit import audit  # noqa: PLC0415 - imports every prover adapter

        audit_s = median_s(lambda: audit(Source(bundle / "log.jsonl", bundle), trust=trust), rounds)
        cli = [sys.executable, "-m", "runner.cli", "audit", str(bundle), "--trust"]
        cli_s = median_s(
            lambda: subprocess.run(
                [*cli, str(root / "k.key.pub"), "--require-signature"],
                check=True,
                capture_output=True,
            ),
            rounds,
        )
        size = (bundle / "log.jsonl").stat().st_size
        return [
            f"{records}-record bundle (log {size / 1e6:.1f} MB, statement {len(payload) / 1e3:.0f} "
            f"kB), median of {rounds}: publish {unsigned_s:.2f} s, publish --sign {signed_s:.2f} "
            f"s; sign the statement {sign_ms:.2f} ms, verify its signature {verify_ms:.2f} ms "
            f"(key {key.keyid[:12]}); the verification path (chain, digests, requests digest, "
            f"statement rebuilt and compared, signature) {verify_s:.2f} s; audit in-process "
            f"{audit_s:.2f} s; `prooflock audit --trust --require-signature` {cli_s:.2f} s",
        ]


def notes(quick: bool) -> list[str]:
    return measure(200 if quick else 1000, 1 if quick else 3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("\n".join(measure(args.records, args.rounds)))
