"""The SSH executor: jobs detached on a remote host, the ledger kept there by a stdlib-only helper
(``remote_ledger``), run-folder path mapping (``paths``) and ``ssh -L`` port forwards (``forward``)."""
