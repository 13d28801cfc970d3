"""The flag guard against the real sglang 0.5.23 source (wheel corpus)."""
from __future__ import annotations

from agent.flag_guard import FlagProposal, review_flags, review_markdown, server_flag_catalog


def _review(root, proposals, accept=False):
    return review_flags(proposals, root / "sglang", root, accept)


def test_flags_defined_by_sglang_are_cited_to_their_definition(sglang_wheel_root):
    review = _review(sglang_wheel_root, [FlagProposal(flag="--speculative-num-steps", value="3"),
                                          FlagProposal(flag="--mem-fraction-static", value="0.85")])
    origins = {v.flag: v.origin for v in review.verdicts}
    assert origins["--speculative-num-steps"].startswith("sglang/srt/arg_groups/fields/spec.py:")
    path, line = origins["--mem-fraction-static"].rsplit(":", 1)
    text = (sglang_wheel_root / path).read_text().splitlines()[int(line) - 1]
    assert "mem_fraction_static" in text  # the citation points at the field itself
    assert review.accepted == {"--speculative-num-steps": {"value": "3", "origin": origins["--speculative-num-steps"]},
                               "--mem-fraction-static": {"value": "0.85", "origin": origins["--mem-fraction-static"]}}


def test_a_flag_only_some_text_mentions_is_rejected_whatever_it_cites(sglang_wheel_root):
    review = _review(sglang_wheel_root, [FlagProposal(flag="--foo", evidence="benchmark/README.md:3")])
    assert review.accepted == {}
    assert review.rejected[0].verdict == "rejected" and "no definition of --foo" in review.rejected[0].reason
    assert "NOT written" in review_markdown(review)


def test_acceptance_option_passes_unsupported_flags_as_user_accepted(sglang_wheel_root):
    review = _review(sglang_wheel_root, [FlagProposal(flag="--foo", value="1")], accept=True)
    assert review.accepted == {"--foo": {"value": "1", "origin": "user-accepted"}}


def test_reserved_malformed_and_multiline_flags_are_rejected_even_when_accepted(sglang_wheel_root):
    review = _review(sglang_wheel_root, [FlagProposal(flag="--port", value="1"), FlagProposal(flag="rm -rf"),
                                          FlagProposal(flag="--mem-fraction-static", value="0.8\nrm -rf /")],
                     accept=True)
    assert review.accepted == {} and len(review.rejected) == 3


def test_private_and_no_cli_fields_are_not_flags(sglang_wheel_root):
    catalog, files = server_flag_catalog(sglang_wheel_root / "sglang", sglang_wheel_root)
    assert len(catalog) > 300 and "sglang/srt/arg_groups/fields/spec.py" in files
    assert "--radix-eviction-policy" in catalog
    assert not any(flag.startswith("---") or "explicitly-set" in flag for flag in catalog)


def test_no_source_means_no_evidence():
    review = review_flags([FlagProposal(flag="--mem-fraction-static", value="0.8")], None, None, False)
    assert review.catalog_size == 0 and review.accepted == {}
