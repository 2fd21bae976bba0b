"""Object-storage adapter: a MinIO/S3 client built from the settings."""

from __future__ import annotations

from minio import Minio

from pipeline.config import Settings


def storage_client(settings: Settings) -> Minio:
    return Minio(
        settings.s3_endpoint,
        access_key=settings.s3_access_key,
        secret_key=settings.s3_secret_key.get_secret_value(),
        secure=settings.s3_secure,
        region=settings.s3_region,
    )
