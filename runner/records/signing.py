"""Keys and DSSE envelopes: who vouches for a statement, checked with securesystemslib.

A signing key is an Ed25519 private key in a PEM file only its owner can read. It may also be the
PEM in `PROOFLOCK_SIGNING_KEY`, which is never printed. `KEY.pub` is its public half: a reader
passes it to `audit --trust`. A key id is securesystemslib's: the sha256 of the public key's
canonical form.

securesystemslib is imported where it is used. Its signer package imports boto3 (for its AWS
signer), and a command that neither signs nor verifies should not pay for that.
"""

from __future__ import annotations

import binascii
import getpass
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)
from pydantic import SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner, SSlibKey

from runner.core.errors import UserError, explain
from runner.core.provenance import host

PAYLOAD_TYPE = "application/vnd.in-toto+json"
UNSIGNED = "unsigned: integrity only, anyone can re-hash it"
# Without a --trust key nobody is named: a key id in an envelope is a label anyone can copy.
UNVERIFIED = "signature present, signer not verified: integrity only"


class SigningSettings(BaseSettings):
    """`PROOFLOCK_SIGNING_KEY` (a path, or the PEM itself) and `PROOFLOCK_VERIFIER_ID`."""

    model_config = SettingsConfigDict(env_prefix="PROOFLOCK_", extra="ignore")

    signing_key: SecretStr | None = None
    verifier_id: str | None = None

    def verifier(self) -> str:
        """Who a reproduction report says replayed: the setting, else user@host."""
        return self.verifier_id or f"{getpass.getuser()}@{host()}"


def load_signing_settings() -> SigningSettings:
    try:
        return SigningSettings()
    except ValidationError as exc:
        raise UserError(f"bad PROOFLOCK_* setting: {explain(exc)}") from None


@dataclass(frozen=True)
class PublicKey:
    """A key a reader trusts, and the file it came from (what messages name)."""

    name: str
    key: SSlibKey

    @property
    def keyid(self) -> str:
        return self.key.keyid


def generate_key(out: Path) -> PublicKey:
    """Write a new Ed25519 private key to `out` (mode 0600, never overwritten) and `out.pub`."""
    pub = public_path(out)
    for path in (out, pub):
        if path.exists() or path.is_symlink():
            raise UserError(f"{path} already exists: keygen never overwrites a key")
    from securesystemslib.signer import CryptoSigner  # noqa: PLC0415

    private = Ed25519PrivateKey.generate()
    signer = CryptoSigner(private)
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise UserError(f"cannot create {out}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(signer.private_bytes)
    public = private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    pub.write_bytes(public)
    return PublicKey(pub.name, signer.public_key)


def public_path(private: Path) -> Path:
    return private.with_name(private.name + ".pub")


def load_signer(path: Path | None, settings: SigningSettings | None = None) -> CryptoSigner | None:
    """The signer to use, or None: do not sign.

    `--sign PATH` comes first, then the settings' key (`PROOFLOCK_SIGNING_KEY`, read by the CLI).
    """
    if path is not None:
        return _signer(_read_private(path), str(path))
    secret = settings.signing_key if settings is not None else None
    if secret is None:
        return None
    value = secret.get_secret_value()
    if value.lstrip().startswith("-----BEGIN"):
        return _signer(value.encode(), "PROOFLOCK_SIGNING_KEY")
    if "\n" in value or not Path(value).is_file():  # never echo what may be the key itself
        raise UserError(
            "PROOFLOCK_SIGNING_KEY is neither a PEM private key nor the path of a key file"
        )
    return _signer(_read_private(Path(value)), value)


def _read_private(path: Path) -> bytes:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0  # _read_key says what is wrong with the path
    if mode & 0o077:
        raise UserError(
            f"{path}: a private key readable by group or others (mode {mode:04o}) is refused; "
            f"run `chmod 600 {path}`"
        )
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such key file (make one with `prooflock keygen`)") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the key ({exc.strerror})") from None


def _signer(pem: bytes, where: str) -> CryptoSigner:
    # The message names where the key came from, never its bytes.
    try:
        private = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise UserError(f"{where}: not an unencrypted PEM private key") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise UserError(f"{where}: not an Ed25519 key (make one with `prooflock keygen`)")
    from securesystemslib.signer import CryptoSigner  # noqa: PLC0415

    return CryptoSigner(private)


def load_public(path: Path) -> PublicKey:
    """A `--trust KEY.pub` file: a PEM Ed25519 public key."""
    data = _read_key(path)
    try:
        public = load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        hint = " (that is the private key: give KEY.pub)" if b"PRIVATE KEY" in data else ""
        raise UserError(f"{path}: not a PEM public key{hint}") from None
    if not isinstance(public, Ed25519PublicKey):
        raise UserError(f"{path}: not an Ed25519 public key")
    from securesystemslib.signer import SSlibKey  # noqa: PLC0415

    return PublicKey(path.name, SSlibKey.from_crypto(public))


def sign(payload: bytes, signer: CryptoSigner) -> bytes:
    """A DSSE envelope (JSON) of an in-toto Statement's bytes."""
    from securesystemslib.dsse import Envelope  # noqa: PLC0415

    envelope = Envelope(payload=payload, payload_type=PAYLOAD_TYPE, signatures={})
    envelope.sign(signer)
    return orjson.dumps(envelope.to_dict(), option=orjson.OPT_INDENT_2) + b"\n"


def read_envelope(data: bytes, name: str) -> Envelope:
    """Parse a DSSE envelope; anything else (a cut file, another format) is bad input naming it."""
    from securesystemslib.dsse import Envelope  # noqa: PLC0415
    from securesystemslib.exceptions import FormatError  # noqa: PLC0415

    try:
        raw = orjson.loads(data)
        if not isinstance(raw, dict) or not isinstance(raw.get("signatures"), list):
            raise ValueError("no signatures list")
        envelope = Envelope.from_dict(raw)
    except (orjson.JSONDecodeError, ValueError, KeyError, TypeError, FormatError, binascii.Error):
        raise UserError(f"{name}: not a DSSE envelope (cut short or damaged)") from None
    if not envelope.signatures:
        raise UserError(f"{name}: a DSSE envelope with no signature")
    return envelope


def is_envelope(data: Any) -> bool:
    return isinstance(data, dict) and "payloadType" in data and "payload" in data


@dataclass
class SignatureCheck:
    """Who signed an envelope: only trusted keys whose signature verifies count.

    A signature's key id is a label its writer chose, so it never names a signer. A key matches an
    envelope by verifying every signature with it, whatever their labels say.
    """

    labels: list[str]  # the key ids the signatures claim: unverified, never shown as a signer
    signed_by: list[PublicKey] = field(default_factory=list)  # trusted keys that verify it
    failure: str | None = None  # why no trusted key verifies it (None: verified, or unchecked)
    forged: bool = False  # it claims a trusted key's id, and no trusted key verifies it

    @property
    def trusted(self) -> bool:
        return bool(self.signed_by)

    def signers(self, keys: list[PublicKey] | None = None) -> str:
        return ", ".join(
            f"{k.keyid} ({k.name})" for k in (self.signed_by if keys is None else keys)
        )


def signature_json(check: SignatureCheck | None) -> dict[str, Any]:
    """Who signed, for --json output (`None`: no envelope at all); labels are never shown."""
    return {
        "signed": check is not None,
        "verified": bool(check and check.trusted),
        "signed_by": [k.keyid for k in check.signed_by] if check else [],
    }


def check_signatures(envelope: Envelope, trust: list[PublicKey]) -> SignatureCheck:
    """Verify every signature of `envelope` with every trusted key, ignoring their labels."""
    check = SignatureCheck(labels=sorted(envelope.signatures))
    if not trust:
        return check
    if envelope.payload_type != PAYLOAD_TYPE:
        check.failure = f"its payload type is {envelope.payload_type!r}, not {PAYLOAD_TYPE}"
        return check
    pae = envelope.pae()
    signatures = [signature.signature for signature in envelope.signatures.values()]
    check.signed_by = [key for key in trust if any(_verifies(key, s, pae) for s in signatures)]
    if check.signed_by:
        return check
    claimed = [key.name for key in trust if key.keyid in check.labels]
    if claimed:
        check.forged = True
        check.failure = f"signature does not verify with {', '.join(claimed)}"
    else:
        names = ", ".join(k.name for k in trust)
        check.failure = (
            f"signature does not verify with {names}: it claims key id "
            f"{', '.join(check.labels)} (a label, not a verified signer)"
        )
    return check


def _verifies(key: PublicKey, signature_hex: str, pae: bytes) -> bool:
    """Whether `key` made this signature (given under the key's own id, whatever its label)."""
    from securesystemslib.exceptions import UnverifiedSignatureError  # noqa: PLC0415
    from securesystemslib.signer import Signature  # noqa: PLC0415

    try:
        key.key.verify_signature(Signature(key.keyid, signature_hex), pae)
    except UnverifiedSignatureError:  # its VerificationError too
        return False
    return True
