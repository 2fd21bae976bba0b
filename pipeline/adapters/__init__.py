"""Thin adapters to the outside: object storage, Kafka admin, Faust, the arrivals publisher, audio fetch."""
