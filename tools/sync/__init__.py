"""Upstream sync of the SGLang checkout: fast-forward-only pull (``pull``), moved dependency pins
(``deps``), changed files that matter for the target model (``impact``), and the MTP
recommendation diff (``recommendation_diff``), put together by ``upstream.sync_upstream``."""
