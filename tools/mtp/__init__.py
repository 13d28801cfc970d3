"""MTP / speculative-decoding flag inference: the answer (``infer``), the model's architecture
(``arch``), choosing and checking a configuration against the hooks' rules (``pick``), the variants
a campaign measures (``variants``), renderings (``render``)."""
