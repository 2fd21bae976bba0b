"""The exception hierarchy: one root, with decode errors and skips kept distinct.

Every error the pipeline raises on purpose derives from :class:`CallQAError`, so
adapters can tell "our verdict on this input" from a bug.
"""


class CallQAError(Exception):
    """Root of every error callqa raises on purpose."""


class ConfigError(CallQAError):
    """Settings or a catalog file are invalid."""


class DecodeError(CallQAError):
    """A payload could not be decoded into an event (malformed, wrong schema, unknown version)."""


class SkipEvent(CallQAError):
    """An event that is valid but not for us (e.g. an object deletion); dropped, not dead-lettered."""


class StackError(CallQAError):
    """The local Kafka/MinIO stack could not be started, reached or stopped."""
