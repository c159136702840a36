"""Tooling for the torch-semiring patch series (see README.md)."""
