"""The Slurm executor: jobs as batch jobs with the ledger on the shared filesystem, job-state queries
(``query``), the shared-folder probe (``probe``), and the stdlib helpers a unit runs on its node
(``unit``, ``serve``)."""
