"""FP8 block-GEMM kernel tuning: which shapes, whether Triton is used at all, fan-out over GPUs,
merge, install with backups, and proof from the server log that the configs were loaded.

Modules (one job each): ``shapes`` (what to tune and where each shape came from),
``configs`` (SGLang's config folder and file names), ``engagement`` (is the Triton path used),
``script`` (static argparse introspection of the tuning script), ``plan`` (units and
longest-first assignment), ``render`` (per-GPU scripts and the driver), ``progress`` (log
parsing), ``fanout`` (launch, poll, retry), ``merge``, ``install``, ``prove``; ``prepare`` (what to
tune and whether it matters), ``tune`` and ``tune_gpus`` (the whole decision tree the campaign's
tune_kernels step calls, with ``outcome``: its arguments and result).
"""
