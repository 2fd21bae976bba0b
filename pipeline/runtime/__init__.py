"""What a running stage process needs around its loop: health and readiness (:mod:`.health`), the
HTTP endpoint and its metrics (:mod:`.endpoint`, :mod:`.http`), the versions it reports, the
backlog it reads from Kafka (:mod:`.lag_kafka`, also the router's recovered progress totals) and
where a bounded replay stands (:mod:`.replay_watch`). Below the runners and adapters, above the
stages; the operator's commands (:mod:`pipeline.ops`) use it too, it uses none of them.
"""
