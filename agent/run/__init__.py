"""One run on disk: its folder and lock (``folder``), the trace (written, read, its schema and versions),
the disk's reserve, the listing of runs, a run's status line and the bundle that hands a run on (its tar headers bounded)."""
