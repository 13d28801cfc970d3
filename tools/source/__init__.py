"""Reading the SGLang source: where it comes from (``resolve``), search (``search``), bounded reads
(``read``), parsed Python (``pysource``), the speculative flag catalog (``spec_catalog``) and the
citation type every finding carries (``origin``)."""
