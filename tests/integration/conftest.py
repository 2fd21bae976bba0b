"""Fixtures shared by the integration tests that run stages against the session's stack."""

from __future__ import annotations

import pytest

from pipeline.adapters.kafka_admin import apply_catalog
from pipeline.adapters.minio_store import storage_client
from pipeline.catalog import load_catalog
from pipeline.config import Settings
from pipeline.stack.minio import prepare_bucket


@pytest.fixture
def settings(stack_settings: Settings, unique: str) -> Settings:
    """A private recordings bucket and topic prefix, with the catalog applied. Arrivals stay on the
    stack's own topic, where MinIO publishes its events, so a real put reaches the router.

    (test_ops_dlq and test_router define their own: they publish arrivals by hand or need no topics.)
    """
    cfg = stack_settings.model_copy(update={
        "recordings_bucket": f"rec-{unique}", "topic_prefix": f"t{unique}.",
        "arrivals_topic": stack_settings.topic("audio.arrivals")})
    prepare_bucket(storage_client(cfg), cfg.recordings_bucket)
    apply_catalog(cfg, load_catalog(cfg.bucket_names))
    return cfg
