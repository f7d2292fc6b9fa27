"""Benchmarks: the service against the reference approach, measured side by side in one run (`make bench`)."""
