"""Measurement: SGLang server lifecycle, benchmark sweeps with SGLang's own client, result parsing and
comparison, per-point accept length from server counter snapshots, and the serve and measure scripts
rendered for a person to review (``script_render``)."""
