"""Adapters: one module per technology, each implementing a core port. Nothing runs at import time."""
