"""Retrievers: adapters in front of what users already run."""
