"""Replay: re-drive a recorded run offline with the record as its source (``driver``, ``served``),
check every decision against the record (``checker``, ``record``), or run it again for real (``rerun``)."""
