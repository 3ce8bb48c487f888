"""How to reach an S3-compatible store: settings from `PROOFLOCK_S3_*`, and the client they make.

boto3 is imported only to make a client, so reading the settings stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from runner.core.errors import UserError, explain

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MiB = 1024 * 1024


class S3Settings(BaseSettings):
    """Unset keys fall back to boto3's own chain (AWS_* variables, profiles, instance roles)."""

    model_config = SettingsConfigDict(env_prefix="PROOFLOCK_S3_", extra="ignore")

    endpoint_url: str | None = Field(default=None, description="an S3-compatible store; unset: AWS")
    region: str = "us-east-1"
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    addressing_style: Literal["path", "virtual", "auto"] | None = Field(
        default=None, description="unset: path for an endpoint_url (most stores want it), else auto"
    )
    multipart_threshold_mb: int = Field(
        default=64, ge=1, description="MiB; larger files go in parts"
    )
    part_size_mb: int = Field(
        default=16, ge=5, le=5120, description="MiB; S3 refuses parts < 5 MiB"
    )
    connect_timeout_s: float = Field(default=5.0, gt=0)
    read_timeout_s: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=3, ge=1, description="tries per request, the first included")

    def secret_values(self) -> list[str]:
        """What must never reach a message or a log: the credentials themselves."""
        secrets = (self.access_key_id, self.secret_access_key, self.session_token)
        return [value for s in secrets if s is not None and (value := s.get_secret_value())]


def load_s3_settings() -> S3Settings:
    """The `PROOFLOCK_S3_*` environment as settings; a bad value is a UserError, not a traceback."""
    try:
        return S3Settings()
    except ValidationError as exc:
        raise UserError(f"bad PROOFLOCK_S3_* setting: {explain(exc)}") from None


def s3_settings_for(*places: str | None) -> S3Settings | None:
    """The `PROOFLOCK_S3_*` settings when one of `places` is in S3 (`s3://`), else None."""
    if not any(place and place.startswith("s3://") for place in places):
        return None
    return load_s3_settings()


def _reveal(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret is not None else None


def make_client(settings: S3Settings) -> S3Client:
    import boto3  # noqa: PLC0415 - a second to import: only for a client
    from botocore.config import Config  # noqa: PLC0415
    from botocore.exceptions import ProfileNotFound  # noqa: PLC0415

    if (settings.access_key_id is None) != (settings.secret_access_key is None):
        raise UserError(
            "set both PROOFLOCK_S3_ACCESS_KEY_ID and PROOFLOCK_S3_SECRET_ACCESS_KEY, "
            "or neither to use the AWS credential chain"
        )
    style = settings.addressing_style or ("path" if settings.endpoint_url else "auto")
    config = Config(
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        retries={"total_max_attempts": settings.max_attempts, "mode": "standard"},
        s3={"addressing_style": style},
        # We send SHA-256 ourselves and hash every download; botocore's extra CRCs would only cost.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    try:
        session = boto3.session.Session(
            aws_access_key_id=_reveal(settings.access_key_id),
            aws_secret_access_key=_reveal(settings.secret_access_key),
            aws_session_token=_reveal(settings.session_token),
            region_name=settings.region,
        )
    except ProfileNotFound as exc:
        raise UserError(f"{exc}: fix AWS_PROFILE, or set the PROOFLOCK_S3_* keys") from None
    return session.client("s3", endpoint_url=settings.endpoint_url, config=config)
