"""Reports built from a run folder alone: report.md / report.html, their sections, plots and the
timeline view."""
