"""Measurement: SGLang server lifecycle, benchmark sweeps with SGLang's own client, result parsing and
comparison, and per-point accept length from server counter snapshots."""
