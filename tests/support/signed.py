"""Keys and freshly published bundles of the bundled example's logs (no prover runs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runner.records.layout import BUNDLE_LOG
from runner.records.publish import publish
from runner.records.signing import generate_key, load_signer

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
