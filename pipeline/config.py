"""Settings: read once at the edge (the CLI), passed down as one frozen object.

Sources, strongest first: explicit arguments, ``CALLQA_*`` environment variables,
an optional settings file (``CALLQA_CONFIG``, TOML or YAML), the connection file
that ``callqa stack up`` writes (``<state_dir>/stack.env``), then defaults.
Nothing else in the package reads the environment.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from pipeline.errors import ConfigError
from pipeline.logs import LogFormat

DEFAULT_STATE_DIR = Path(".callqa")
STACK_ENV_FILE = "stack.env"


class Settings(BaseSettings):
    """Everything an adapter needs to reach Kafka, object storage and the catalog."""

    model_config = SettingsConfigDict(env_prefix="CALLQA_", frozen=True, extra="ignore")

    state_dir: Path = DEFAULT_STATE_DIR
    cache_dir: Path = Path.home() / ".cache" / "callqa"  # Kafka jars, MinIO binary, model weights
    config: Path | None = None

    kafka_bootstrap: str = "127.0.0.1:9092"
    # Extra librdkafka properties for a real cluster (security.protocol, sasl.*, ...).
    kafka_config: dict[str, str] = Field(default_factory=dict)
    topic_prefix: str = ""
    # Where arrivals are read from, when not the prefixed catalog name (e.g. one shared MinIO target).
    arrivals_topic: str | None = None
    replication_factor: int | None = None  # None: the catalog's value
    # Partitions per catalog topic for this deployment, over the catalog's, e.g.
    # {"audio.bucket.long": 20}: `callqa plan` says how many a bucket's workers need. Topics that
    # must match audio.arrivals (router.seen, router.retry) follow it (pipeline/catalog.py).
    topic_partitions: dict[str, int] = Field(default_factory=dict)

    s3_endpoint: str = "127.0.0.1:9000"
    s3_access_key: str = "callqa"
    s3_secret_key: SecretStr = SecretStr("callqa-secret")
    s3_secure: bool = False
    s3_region: str | None = None
    recordings_bucket: str = "recordings"
    # Transient storage errors (connection refused, timeouts, 5xx) are retried with backoff for this
    # long before a call is dead-lettered as fetch_failed (pipeline/stages/retry.py).
    storage_retry_deadline_s: float = 300.0

    # Duration buckets: N edges make N+1 buckets, the last open-ended.
    bucket_edges_s: tuple[float, ...] = (30.0, 120.0, 600.0)
    bucket_names: tuple[str, ...] = ("short", "medium", "long", "xlong")
    max_duration_s: float = 4 * 3600.0

    # The Faust router takes arrivals in batches of up to router_batch_max, waiting at most
    # router_batch_window_s for a batch to fill; router_probe_threads probe a batch's objects at
    # once (the store client blocks). Its outputs are sent together and the batch is acknowledged
    # after all their deliveries. A batch max of 1 is one arrival at a time.
    router_batch_max: int = Field(default=64, ge=1)
    router_batch_window_s: float = Field(default=0.05, gt=0.0)  # 0 would wait for a full batch
    router_probe_threads: int = Field(default=8, ge=1)
    # The QA stage likewise takes transcripts in batches: evaluated in turn off the event loop, their
    # results sent together and the batch acknowledged after all deliveries (one broker round trip
    # per batch instead of one per call: one call at a time held a QA process near 6 calls/s).
    qa_batch_max: int = Field(default=64, ge=1)
    qa_batch_window_s: float = Field(default=0.05, gt=0.0)
    # How often the Faust stages (router, QA, redact) commit their transaction: outputs become
    # visible to read_committed consumers at this pace (Faust's own default, 2.8 s).
    stage_commit_interval_s: float = Field(default=2.8, gt=0.0)

    # ASR engine (names a model in the registry; see pipeline/asr/registry.py)
    asr_model: str = "whisper-base"
    asr_language: str | None = None  # None: detect per channel
    asr_threads: int | None = None
    # languages whose number regions get a second, digit-biased decode (pipeline/asr/number_pass.py)
    asr_number_languages: tuple[str, ...] = ("en", "zh")
    # word-level times (pipeline/asr/alignment.py): segments holding PII (what audio redaction
    # cuts), every segment, or none
    asr_word_timestamps: Literal["pii", "all", "off"] = "pii"

    # Transcripts are published PII-redacted. Raw text only where an operator turns this on,
    # and then only onto asr.transcripts.raw (short retention, see topics/catalog.yaml).
    publish_raw_transcripts: bool = False

    # The redaction stage (`callqa redact`): redacted copies of recordings with PII go to this bucket
    # (never the recordings bucket: its notification would route every copy as a new call), under
    # this key prefix; the spans are replaced by silence or a 1 kHz tone; a copy larger than
    # redact_max_copy_bytes (decoded, it takes as much memory again) is dead-lettered instead.
    redact_bucket: str = "recordings-redacted"
    redact_prefix: str = ""
    redact_with: Literal["silence", "tone"] = "silence"
    redact_max_copy_bytes: int = Field(default=1 << 30, gt=0)
    # Issue 31's optional policy (off by default): after its copy is written and verified, the copy's
    # bytes also replace the original at its own key (conditional on the transcribed ETag) and, in a
    # versioned recordings bucket, the transcribed version is removed. Not for converted copies (a lossy
    # original, whose copy is a WAV): those originals are kept. The unredacted audio is then gone.
    redact_replace_original: bool = False

    # QA rule packs added to the default pack (files or folders of YAML)
    qa_rule_packs: tuple[Path, ...] = ()

    # Each stage process serves /metrics, /healthz and /readyz here when metrics_port is set
    # (0.0.0.0 in containers; the deploy manifests use port 9100).
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    liveness_limit_s: float = 120.0  # /healthz fails when the stage's loop has not turned for this long
    # ... or when a worker's batch computes past max(floor, factor x its audio seconds / the RTFx of
    # recent batches): a hung accelerator (pipeline/stages/deadline.py). Before any batch is measured
    # the RTFx is taken as initial_rtfx.
    liveness_batch_floor_s: float = 600.0
    liveness_batch_factor: float = 10.0
    liveness_batch_initial_rtfx: float = 1.0
    backlog_interval_s: float = 15.0  # how often a stage refreshes its backlog gauges
    dlq_max_attempts: int = 3  # redrives of one letter before it is parked instead

    log_format: LogFormat = "auto"
    log_level: str = "info"

    @field_validator("bucket_edges_s")
    @classmethod
    def _edges_increase(cls, edges: tuple[float, ...]) -> tuple[float, ...]:
        if any(b <= a for a, b in zip(edges, edges[1:])) or any(e <= 0 for e in edges):
            raise ValueError(f"bucket edges must be positive and increasing, got {list(edges)}")
        return edges

    @field_validator("redact_prefix")
    @classmethod
    def _prefix_is_relative(cls, prefix: str) -> str:
        if prefix.startswith("/"):
            raise ValueError(f"an object key prefix, without a leading '/', got {prefix!r}")
        return prefix

    @model_validator(mode="after")
    def _names_match_edges(self) -> Settings:
        if len(self.bucket_names) != len(self.bucket_edges_s) + 1:
            raise ValueError(
                f"{len(self.bucket_edges_s)} bucket edges need {len(self.bucket_edges_s) + 1} "
                f"bucket names, got {list(self.bucket_names)}"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FileSource(settings_cls), _StackFileSource(settings_cls))

    def topic(self, name: str) -> str:
        """The physical topic name of a catalog topic (the prefix isolates tenants and tests)."""
        return f"{self.topic_prefix}{name}"

    @property
    def arrivals(self) -> str:
        return self.arrivals_topic or self.topic("audio.arrivals")

    def kafka_common(self) -> dict[str, Any]:
        """librdkafka properties shared by every client."""
        return {"bootstrap.servers": self.kafka_bootstrap, **self.kafka_config}

    def redacted(self) -> dict[str, Any]:
        """A loggable view: every secret masked (the only form settings may be logged in)."""
        return _mask_secrets(self.model_dump(mode="json"))


# Keys whose values are secrets, at any depth: passwords, secrets, private keys, SASL/OAuth configs.
_SECRET_KEY = re.compile(r"password|secret|ssl\.key\.pem|sasl\.oauthbearer\.config|sasl\.jaas|token|credential",
                         re.IGNORECASE)


def _mask_secrets(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: "***" if _SECRET_KEY.search(str(k)) else _mask_secrets(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_mask_secrets(v) for v in data]
    return data


class _FileSource(PydanticBaseSettingsSource):
    """The optional settings file named by ``CALLQA_CONFIG`` (TOML or YAML)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = os.environ.get("CALLQA_CONFIG")
        if not path:
            return {}
        return load_settings_file(Path(path))


class _StackFileSource(PydanticBaseSettingsSource):
    """KEY=VALUE lines written by ``callqa stack up`` so every command finds the local stack."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        # A state_dir given explicitly (arguments, environment, file) decides which stack file applies.
        state_dir = Path(self.current_state.get("state_dir") or DEFAULT_STATE_DIR)
        return read_env_file(state_dir / STACK_ENV_FILE)


def load_settings_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (OSError, tomllib.TOMLDecodeError) as exc:  # neither quotes the file's text
        raise ConfigError(f"cannot read settings file {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot read settings file {path}: {_yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"settings file {path} must hold a mapping")
    return data


def read_env_file(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    values = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.startswith("CALLQA_"):
            values[key.removeprefix("CALLQA_").lower()] = value
    return values


def write_env_file(path: Path, values: dict[str, str]) -> None:
    """Written owner-only (0600) from the first byte: it holds the storage secret."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(f"CALLQA_{k.upper()}={v}\n" for k, v in values.items()))
    os.replace(tmp, path)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's complaint and position, without the snippet of the line it quotes (it may hold a secret)."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        return "; ".join(filter(None, [exc.context, exc.problem])) + f" ({where})"
    return f"not valid YAML ({type(exc).__name__})"


# Fields that hold secrets as a whole: a wrong value there is never shown, nor any part of it.
_SECRET_FIELDS = frozenset({"kafka_config"} | {
    name for name, field in Settings.model_fields.items() if field.annotation is SecretStr})


def describe_invalid(exc: ValidationError) -> str:
    """What pydantic found wrong, naming each setting; a rejected value is shown only when it can hold no secret.

    ``str(ValidationError)`` prints every ``input_value``: a numeric ``sasl.password`` would be echoed.
    """
    problems = []
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"]]
        shown = error.get("input")
        secret = bool(loc) and (loc[0] in _SECRET_FIELDS or any(_SECRET_KEY.search(part) for part in loc))
        got = f" (got {shown!r})" if not secret and isinstance(shown, (str, int, float, bool)) else ""
        problems.append(f"{'.'.join(loc) or 'settings'}: {error['msg']}{got}")
    return "invalid settings: " + "; ".join(problems)


def load_settings(**overrides: Any) -> Settings:
    """Build the settings once; raise ConfigError with the reason when they are invalid (secrets masked)."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(describe_invalid(exc)) from None  # the chained error would print the inputs
    except ValueError as exc:  # pydantic-settings' SettingsError names the field and source, not the value
        raise ConfigError(str(exc)) from None  # its cause (a JSONDecodeError) holds the raw value
