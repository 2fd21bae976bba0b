"""The operator's commands: lag/ETA, dead-letter redrive, replay, planning.

Pure modules (no Kafka) hold the decisions and the arithmetic; the ``*_kafka`` modules are
thin adapters that read or write the cluster; :mod:`pipeline.ops.cli` wires them to ``callqa``.
What a running stage needs (health, the endpoint, versions, the backlog reader) is in
:mod:`pipeline.runtime`, which the runners import; nothing outside the command line imports ops.
"""
