"""Reports built from a run folder alone: report.md / report.html (one jinja environment, markdown
rendered by markdown-it with raw HTML off), one Table type for every table, the measurement's and
the campaign's sections, plots, and the timeline (computed from the trace here, never via replay)."""
