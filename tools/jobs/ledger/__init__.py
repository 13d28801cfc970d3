"""The job ledger on disk: atomic file helpers (``files``) and ledger snapshots turned into job
states (``state``)."""
