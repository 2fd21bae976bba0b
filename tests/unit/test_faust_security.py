"""CALLQA_KAFKA_CONFIG (librdkafka properties) mapped onto the Faust stages' broker settings: no broker needed."""

from __future__ import annotations

import ssl
from pathlib import Path

import certifi
import faust
import pytest
from structlog.testing import capture_logs

from pipeline.adapters.faust_auth import faust_ignored_keys, faust_security, is_security_key
from pipeline.config import Settings
from pipeline.errors import ConfigError


def test_no_security_settings_is_plain_text() -> None:
    assert faust_security({}) == {}
    assert faust_security({"security.protocol": "plaintext"}) == {}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_sasl_plaintext_becomes_sasl_credentials(mechanism: str) -> None:
    out = faust_security(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism,
            "sasl.username": "callqa",
            "sasl.password": "s3cret",
        }
    )
    creds = out["broker_credentials"]
    assert isinstance(creds, faust.SASLCredentials)
    assert (creds.protocol.value, creds.mechanism.value, creds.username, creds.password) == (
        "SASL_PLAINTEXT",
        mechanism,
        "callqa",
        "s3cret",
    )
    assert creds.ssl_context is None


def test_sasl_ssl_carries_the_ca_and_the_mechanism_spelled_either_way() -> None:
    out = faust_security(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "scram-sha-512",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.location": certifi.where(),
        }
    )
    creds = out["broker_credentials"]
    assert (creds.protocol.value, creds.mechanism.value) == ("SASL_SSL", "SCRAM-SHA-512")
    assert creds.ssl_context.verify_mode == ssl.CERT_REQUIRED and creds.ssl_context.check_hostname
    assert creds.ssl_context.cert_store_stats()["x509_ca"] > 0


def test_ssl_only_and_hostname_checks_off_when_asked() -> None:
    out = faust_security(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": certifi.where(),
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    creds = out["broker_credentials"]
    assert isinstance(creds, faust.SSLCredentials) and creds.protocol.value == "SSL"
    assert not creds.context.check_hostname and creds.context.verify_mode == ssl.CERT_REQUIRED
    unverified = faust_security({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"})
    assert unverified["broker_credentials"].context.verify_mode == ssl.CERT_NONE


SCRAM = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-256",
    "sasl.username": "u",
    "sasl.password": "p",
}
TUNING = {
    "linger.ms": "5",
    "fetch.max.bytes": "104857600",
    "socket.keepalive.enable": "true",
    "client.id": "callqa-asr",
    "session.timeout.ms": "30000",
}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"sasl.oauthbearer.config": "x", "security.protocol": "SASL_SSL"},
            "cannot apply: ['sasl.oauthbearer.config']",
        ),
        ({**SCRAM, "sasl.kerberos.service.name": "kafka", "linger.ms": "5"}, "['sasl.kerberos.service.name'];"),
        ({"security.protocol": "SSL", "ssl.keystore.location": "/k.p12"}, "['ssl.keystore.location']"),
        ({"security.protocol": "SSL", "ssl.crl.location": "/crl.pem"}, "['ssl.crl.location']"),
        ({"security.protocol": "SSL", "ssl.cipher.suites": "AES256"}, "['ssl.cipher.suites']"),
        ({**SCRAM, "https.ca.location": "/ca.pem"}, "['https.ca.location']"),
        ({**SCRAM, "enable.sasl.oauthbearer.unsecure.jwt": "true"}, "['enable.sasl.oauthbearer.unsecure.jwt']"),
        ({"Security.Protocol": "SSL"}, "['Security.Protocol']"),  # never mistaken for a tuning key
        ({"security.protocol": "TLS"}, "security.protocol 'TLS'"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": "p"},
            "GSSAPI is not supported",
        ),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER is not supported"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256"},
            "needs sasl.username and sasl.password",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.mechanisms": "SCRAM-SHA-256",
                "sasl.username": "u",
                "sasl.password": "p",
            },
            "disagree",
        ),
        ({"sasl.username": "u", "sasl.password": "p"}, "security.protocol is PLAINTEXT"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "p",
                "ssl.ca.location": "/ca.pem",
            },
            "['ssl.ca.location'] but security.protocol is SASL_PLAINTEXT",
        ),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "cannot build the TLS context"),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"}, "needs both"),
        ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"}, "expected https or none"),
    ],
)
def test_what_cannot_be_applied_is_refused_with_its_name(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        faust_security(config)


def test_the_faust_app_is_built_with_the_mapped_credentials(tmp_path: Path) -> None:
    from pipeline.adapters.faust_app import create_faust_app

    cfg = Settings(
        state_dir=tmp_path,
        kafka_config={
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "callqa",
            "sasl.password": "pw",
        },
    )
    app = create_faust_app(cfg, "auth-test")
    creds = app.conf.broker_credentials
    assert isinstance(creds, faust.SASLCredentials) and creds.mechanism.value == "SCRAM-SHA-256"


def test_keys_that_are_not_about_security_are_left_to_the_confluent_clients() -> None:
    plain = faust_security({**SCRAM, **TUNING})["broker_credentials"]
    assert isinstance(plain, faust.SASLCredentials)
    assert (plain.mechanism.value, plain.username) == ("SCRAM-SHA-256", "u")
    assert faust_security(TUNING) == {}
    assert faust_ignored_keys({**SCRAM, **TUNING}) == sorted(TUNING)
    assert faust_ignored_keys(SCRAM) == []
    # the ignored ones still need a security protocol for the SASL keys beside them
    with pytest.raises(ConfigError, match="security.protocol is PLAINTEXT"):
        faust_security({**TUNING, "sasl.username": "u", "sasl.password": "p"})


@pytest.mark.parametrize(
    ("key", "security"),
    [
        ("security.protocol", True),
        ("sasl.kerberos.keytab", True),
        ("ssl.providers", True),
        ("ssl_key", True),
        ("https.ca.pem", True),
        ("enable.ssl.certificate.verification", True),
        ("enable.sasl.oauthbearer.unsecure.jwt", True),
        ("SSL.CA.LOCATION", True),
        ("linger.ms", False),
        ("client.id", False),
        ("socket.keepalive.enable", False),
        ("enable.idempotence", False),
        ("statistics.interval.ms", False),
    ],
)
def test_security_keys_are_told_from_tuning_keys(key: str, security: bool) -> None:
    assert is_security_key(key) is security


def test_the_faust_app_warns_once_about_the_keys_it_leaves_out(tmp_path: Path) -> None:
    from pipeline.adapters.faust_app import create_faust_app

    with capture_logs() as logs:
        app = create_faust_app(Settings(state_dir=tmp_path, kafka_config={**SCRAM, **TUNING}), "auth-test-2")
        create_faust_app(Settings(state_dir=tmp_path, kafka_config=SCRAM), "auth-test-3")
    assert app.conf.broker_credentials.mechanism.value == "SCRAM-SHA-256"
    warnings = [e for e in logs if e["event"] == "kafka_config_ignored"]
    assert len(warnings) == 1, logs
    assert (warnings[0]["log_level"], warnings[0]["app_id"], warnings[0]["keys"]) == (
        "warning",
        "auth-test-2",
        sorted(TUNING),
    )
    with pytest.raises(ConfigError, match="sasl.kerberos.service.name"):
        create_faust_app(
            Settings(state_dir=tmp_path, kafka_config={**SCRAM, "sasl.kerberos.service.name": "kafka"}), "auth-test-4"
        )
