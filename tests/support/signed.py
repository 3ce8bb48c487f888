"""Keys, freshly published bundles of the bundled example's logs, and what a replay of one
would report (no prover runs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runner.records.attest import RecordOutcome, ReproductionSummary
from runner.records.checkpoint import inspect_chain, recorded_runs
from runner.records.layout import BUNDLE_LOG, STATEMENT
from runner.records.publish import publish
from runner.records.signing import generate_key, load_signer
from runner.records.statement import sha256

EXAMPLES = Path(__file__).parent.parent.parent / "manifests" / "results"


@dataclass(frozen=True)
class Key:
    private: Path
    public: Path
    id: str

    def trust(self) -> tuple[str, str]:
        """The audit flags that trust this key."""
        return ("--trust", str(self.public))


def make_key(root: Path, name: str) -> Key:
    made = generate_key(root / f"{name}.key")
    return Key(root / f"{name}.key", root / f"{name}.key.pub", made.keyid)


def published(root: Path, example: str, key: Key | None = None, name: str = "bundle") -> Path:
    """The example's log (`example` or `example-local`) published into `root/name`."""
    signer = load_signer(key.private) if key is not None else None
    return publish(EXAMPLES / example / BUNDLE_LOG, root / name, signer=signer).path


def summary_of(
    bundle: Path, verifier: str, differ: dict[int, str] | None = None, drift: list[str] = ()
) -> ReproductionSummary:
    """What a replay of `bundle` would hand over; `differ`: index → the verdict it got now;
    `drift`: the environment inputs that changed (for every record)."""
    differ = differ or {}
    chain = inspect_chain(bundle / BUNDLE_LOG)
    outcomes = []
    for index, (_, result) in enumerate(recorded_runs(chain.records)):
        now = differ.get(index, result.verdict.value)
        same = "environment differs" if drift else "match"
        status = same if now == result.verdict.value else "verdict differs"
        outcomes.append(RecordOutcome(index, result.artifact, result.verdict.value, now, status))
    return ReproductionSummary(
        verifier=verifier,
        resource=str(bundle),
        log_sha256=sha256((bundle / BUNDLE_LOG).read_bytes()),
        head=chain.head,
        records=len(chain.records),
        statement_sha256=sha256((bundle / STATEMENT).read_bytes()),
        environment={"backend": "local", "host": "lab", "images": {}, "drift": list(drift)},
        outcomes=outcomes,
    )
