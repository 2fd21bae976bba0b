"""The operator's toolkit: versions, health, backlog headers, lag/ETA, dead-letter redrive, replay, planning.

Pure modules (no Kafka) hold the decisions and the arithmetic; the ``*_kafka`` modules are
thin adapters that read or write the cluster; :mod:`pipeline.ops.cli` wires them to ``callqa``.
"""
