"""MTP / speculative-decoding flag inference: the answer (``infer``; the model's architecture
is tools/checkpoint/architecture.py), choosing and checking a configuration against the hooks' rules (``pick``), the variants
a campaign measures (``variants``), renderings (``render``)."""
