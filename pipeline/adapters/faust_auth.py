"""The Faust stages' Kafka security, from the same librdkafka settings as every confluent client.

``CALLQA_KAFKA_CONFIG`` holds librdkafka properties, shared by every stage. The confluent
clients take them as they are; Faust (aiokafka underneath) needs the security part of them as
``broker_credentials``. :func:`faust_security` is the one mapping between the two.

The keys fall in two kinds. Security keys (``security.protocol``, ``sasl.*``, ``ssl.*``,
``https.*``, ``enable.ssl.certificate.verification``, …) decide how the stages authenticate and
encrypt: one the mapping cannot honour exactly is refused at start with its name, because a
router or QA stage that connected with weaker security than asked would, at best, fail later and,
at worst, talk to the broker in clear text. Every other key (tuning, client ids, timeouts) is for
the confluent clients only: :func:`faust_ignored_keys` names them so the stage can say so once.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import Any

import faust

from pipeline.errors import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_KEYS = frozenset({"sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password"})
SSL_KEYS = frozenset(
    {
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification",
    }
)
SUPPORTED_KEYS = frozenset({"security.protocol"}) | SASL_KEYS | SSL_KEYS
# What makes a librdkafka key one about authentication or encryption: its family (security.*,
# sasl.*, ssl.*, the ssl_* values set from code, https.* for the OIDC token endpoint's TLS) or one
# of the two outside them. Matched case-blind, so a key in the wrong case is refused, not ignored.
SECURITY_PREFIXES = ("security.", "sasl.", "ssl.", "ssl_", "https.")
SECURITY_KEYS = frozenset({"enable.ssl.certificate.verification", "enable.sasl.oauthbearer.unsecure.jwt"})


def is_security_key(key: str) -> bool:
    name = key.strip().lower()
    return name in SECURITY_KEYS or name.startswith(SECURITY_PREFIXES)


def faust_ignored_keys(kafka_config: Mapping[str, object]) -> list[str]:
    """The keys the Faust stages leave to the confluent clients: every one that is not about security."""
    return sorted(k for k in kafka_config if not is_security_key(k))


def faust_security(kafka_config: Mapping[str, str]) -> dict[str, Any]:
    """``faust.App`` settings for these librdkafka properties: ``{}`` for plain text, else
    ``broker_credentials``. Keys that are not about security are left out (see
    :func:`faust_ignored_keys`). Raises ConfigError for a security key it cannot honour exactly
    or settings that disagree."""
    config = {str(k): str(v) for k, v in kafka_config.items() if is_security_key(str(k))}
    unknown = sorted(set(config) - SUPPORTED_KEYS)
    if unknown:
        raise ConfigError(
            f"CALLQA_KAFKA_CONFIG security keys the Faust stages (router, QA) cannot apply: {unknown}; "
            f"of the security settings they take only {sorted(SUPPORTED_KEYS)}"
        )
    protocol = config.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"security.protocol {config['security.protocol']!r}: expected one of {list(PROTOCOLS)}")
    uses_sasl, uses_ssl = protocol.startswith("SASL_"), protocol.endswith("SSL")
    stray = sorted(
        (set(config) & SASL_KEYS if not uses_sasl else set()) | (set(config) & SSL_KEYS if not uses_ssl else set())
    )
    if stray:
        raise ConfigError(
            f"CALLQA_KAFKA_CONFIG sets {stray} but security.protocol is {protocol}: "
            "they would not be used (set security.protocol to SASL_SSL, SASL_PLAINTEXT or SSL)"
        )
    context = _ssl_context(config) if uses_ssl else None
    if not uses_sasl:
        return {} if context is None else {"broker_credentials": faust.SSLCredentials(context)}
    mechanism = _mechanism(config)
    username, password = config.get("sasl.username"), config.get("sasl.password")
    if not username or password is None:
        raise ConfigError(f"{protocol} with {mechanism} needs sasl.username and sasl.password")
    return {
        "broker_credentials": faust.SASLCredentials(
            username=username, password=password, ssl_context=context, mechanism=mechanism
        )
    }


def _mechanism(config: dict[str, str]) -> str:
    given = {config[k].strip().upper() for k in ("sasl.mechanism", "sasl.mechanisms") if k in config}
    if len(given) > 1:
        raise ConfigError(f"sasl.mechanism and sasl.mechanisms disagree: {sorted(given)}")
    mechanism = given.pop() if given else "GSSAPI"  # librdkafka's default
    if mechanism not in MECHANISMS:
        raise ConfigError(
            f"SASL mechanism {mechanism} is not supported by the Faust stages "
            f"(supported: {list(MECHANISMS)}; set sasl.mechanism)"
        )
    return mechanism


def _ssl_context(config: dict[str, str]) -> ssl.SSLContext:
    ca = config.get("ssl.ca.location")
    try:
        context = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH,
            cafile=ca if ca and not os.path.isdir(ca) else None,
            capath=ca if ca and os.path.isdir(ca) else None,
            cadata=config.get("ssl.ca.pem"),
        )
        cert, key = config.get("ssl.certificate.location"), config.get("ssl.key.location")
        if cert or key:
            if not (cert and key):
                raise ConfigError("a client certificate needs both ssl.certificate.location and ssl.key.location")
            context.load_cert_chain(cert, key, password=config.get("ssl.key.password"))
        elif "ssl.key.password" in config:
            raise ConfigError("ssl.key.password is set without ssl.key.location")
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot build the TLS context from CALLQA_KAFKA_CONFIG: {exc}") from exc
    algorithm = config.get("ssl.endpoint.identification.algorithm", "https").lower()
    if algorithm not in ("https", "none"):
        raise ConfigError(f"ssl.endpoint.identification.algorithm {algorithm!r}: expected https or none")
    context.check_hostname = algorithm == "https"
    verify = config.get("enable.ssl.certificate.verification", "true").lower()
    if verify not in ("true", "false"):
        raise ConfigError(f"enable.ssl.certificate.verification {verify!r}: expected true or false")
    if verify == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
