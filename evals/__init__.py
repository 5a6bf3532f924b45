"""Labeled evaluation sets and the scripts that drew and resolved them (read by tests and benches)."""
