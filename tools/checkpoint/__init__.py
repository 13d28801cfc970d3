"""The checkpoint in hand: its config.json read as SGLang reads it, the tensor names its index lists,
and the drafters those carry (an MTP head, a bundled DSpark drafter), every fact cited; and the model's
architecture, decided once from config.json, --arch or the SGLang tree (``architecture``)."""
