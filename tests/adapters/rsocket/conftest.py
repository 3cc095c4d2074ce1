"""Tests of the RSocket extension adapters (router, routed clients, load
balancer); shared fixtures live in tests/adapters/conftest.py."""
