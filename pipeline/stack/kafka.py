"""A single-node Apache Kafka 4 broker in KRaft combined mode, run from Maven Central jars.

The jars are resolved once with Maven into the cache directory; later runs reuse them.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import StackError
from pipeline.stack.processes import port_open, start_detached, wait_until

KAFKA_VERSION = "4.1.1"
POM = Path(__file__).with_name("kafka-pom.xml")


def ensure_jars(cache_dir: Path) -> Path:
    libs = cache_dir / f"kafka-{KAFKA_VERSION}" / "libs"
    if (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        return libs
    if shutil.which("mvn") is None:
        raise StackError("Maven (mvn) is needed once to fetch the Kafka jars into the cache")
    tmp = libs.with_name("libs.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    result = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
         f"-Dkafka.version={KAFKA_VERSION}", f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"],
        capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise StackError(f"resolving Kafka jars failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    tmp.rename(libs)  # only a complete download becomes the cache
    return libs


@dataclass(frozen=True)
class ScramUser:
    """A SCRAM user for the optional SASL_PLAINTEXT listener (created when the storage is formatted)."""

    name: str
    password: str
    mechanism: str = "SCRAM-SHA-256"

    def client_config(self) -> dict[str, str]:
        """The librdkafka properties (CALLQA_KAFKA_CONFIG) that reach the SASL listener as this user."""
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": self.mechanism,
                "sasl.username": self.name, "sasl.password": self.password}


def _server_properties(data_dir: Path, port: int, controller_port: int, sasl_port: int | None = None,
                       sasl_mechanism: str = "SCRAM-SHA-256") -> str:
    # The optional SASL listener sits beside PLAINTEXT (MinIO and the broker itself keep that one).
    sasl = f",SASL_PLAINTEXT://127.0.0.1:{sasl_port}" if sasl_port else ""
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}{sasl}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}{sasl}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        + (",SASL_PLAINTEXT:SASL_PLAINTEXT" if sasl_port else ""),
        *([f"sasl.enabled.mechanisms={sasl_mechanism}",
           f"listener.name.sasl_plaintext.{sasl_mechanism.lower()}.sasl.jaas.config="
           "org.apache.kafka.common.security.scram.ScramLoginModule required;"] if sasl_port else []),
        f"log.dirs={data_dir}",
        # One node: internal topics cannot have more than one replica.
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        # The catalog is the truth: a typo in a topic name must fail, not create a topic.
        "auto.create.topics.enable=false",
        "num.partitions=1",
        "",
    ])


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = warn
logger.apache.name = org.apache.kafka
logger.apache.level = warn
"""


def new_cluster_id() -> str:
    """A random KRaft cluster id (16 bytes, URL-safe base64) that never starts with '-'.

    Kafka's own ``Uuid.randomUuid`` redraws such ids because command lines read them as options;
    clearing the first byte's top bit does the same in one draw (127 random bits are plenty).
    """
    raw = bytearray(uuid.uuid4().bytes)
    raw[0] &= 0x7F  # the first character is then one of A-Z, a-f: never '-' (62) or '_' (63)
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")


def write_config(home: Path, port: int, controller_port: int, sasl_port: int | None = None,
                 sasl_mechanism: str = "SCRAM-SHA-256") -> Path:
    """server.properties and the log4j2 file under ``home``; returns the properties path."""
    props = home / "server.properties"
    home.mkdir(parents=True, exist_ok=True)
    props.write_text(_server_properties(home / "data", port, controller_port, sasl_port, sasl_mechanism))
    (home / "log4j2.properties").write_text(_LOG4J2.format(log=home / "server.log"))
    return props


def java_command(libs: Path, home: Path, heap_mb: int = 768) -> list[str]:
    return [
        "java", f"-Xms{heap_mb // 2}m", f"-Xmx{heap_mb}m", "-XX:+UseG1GC",
        f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}", "-cp", f"{libs}/*",
    ]


def format_command(java: list[str], props: Path, cluster_id: str, scram_user: ScramUser | None = None) -> list[str]:
    """The storage tool's command line; the id is glued to its option so that no id reads as an option."""
    scram = (["--add-scram", f"{scram_user.mechanism}=[name={scram_user.name},password={scram_user.password}]"]
             if scram_user else [])
    return [*java, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(props), *scram]


def format_storage(java: list[str], props: Path, cluster_id: str, scram_user: ScramUser | None = None) -> None:
    result = subprocess.run(format_command(java, props, cluster_id, scram_user), capture_output=True, text=True)
    if result.returncode != 0:
        raise StackError(f"formatting Kafka storage failed: {result.stdout}{result.stderr}")


def start(libs: Path, home: Path, port: int, controller_port: int, heap_mb: int = 768,
          on_started: Callable[[int], None] = lambda pid: None,
          sasl_port: int | None = None, scram_user: ScramUser | None = None,
          sasl_mechanism: str = "SCRAM-SHA-256") -> int:
    """Format the storage on first use, start the broker, wait until its port answers.

    With ``sasl_port`` the broker also listens there for SASL_PLAINTEXT (``sasl_mechanism``);
    ``scram_user`` is created when the storage is formatted (KRaft keeps SCRAM credentials in
    its metadata, so a restart needs only the port and mechanism).
    """
    props = write_config(home, port, controller_port, sasl_port, sasl_mechanism)
    java = java_command(libs, home, heap_mb)
    if not (home / "data" / "meta.properties").exists():
        if sasl_port and scram_user is None:
            raise StackError("a SASL listener needs a SCRAM user, created when the storage is formatted")
        format_storage(java, props, new_cluster_id(), scram_user)
    log = home / "stdout.log"
    pid = start_detached([*java, "kafka.Kafka", str(props)], log)
    on_started(pid)  # recorded before the wait: a broker that never gets ready can still be stopped
    wait_until(lambda: port_open(port), "Kafka broker", timeout_s=90, pid=pid, log=log)
    return pid
