"""Runners: the Faust router and QA stage, the confluent-kafka ASR worker, embedded and local modes."""
