"""Pure stages: routing, batching, commit bookkeeping, QA outcomes. No Kafka, MinIO, Faust or torch."""
