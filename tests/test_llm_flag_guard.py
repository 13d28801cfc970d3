"""The flag guard against the real sglang 0.5.23 source (wheel corpus)."""
from __future__ import annotations

from agent.campaign.llm.flag_guard import FlagProposal, review_flags, review_markdown, server_flag_catalog
from tools.checkpoint.architecture import Architecture


def _review(root, proposals, accept=False):
    return review_flags(proposals, root / "sglang", root, accept)


def test_flags_defined_by_sglang_are_cited_to_their_definition(sglang_wheel_root):
    # steps/topk/draft tokens go together (a hook rule the guard also checks, see below)
    trio = {"--speculative-num-steps": "3", "--speculative-eagle-topk": "1", "--speculative-num-draft-tokens": "4"}
    review = _review(sglang_wheel_root, [*[FlagProposal(flag=f, value=v) for f, v in trio.items()],
                                         FlagProposal(flag="--mem-fraction-static", value="0.85")])
    origins = {v.flag: v.origin for v in review.verdicts}
    assert origins["--speculative-num-steps"].startswith("sglang/srt/arg_groups/fields/spec.py:")
    path, line = origins["--mem-fraction-static"].rsplit(":", 1)
    text = (sglang_wheel_root / path).read_text().splitlines()[int(line) - 1]
    assert "mem_fraction_static" in text  # the citation points at the field itself
    assert review.accepted == {**{f: {"value": v, "origin": origins[f]} for f, v in trio.items()},
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


DSV4 = "deepseek-ai/DeepSeek-V4-Flash"


def _cited_line(root, citation: str) -> str:
    path, line = citation.rsplit("(", 1)[-1].rstrip(")").rsplit(":", 1)
    return (root / path).read_text().splitlines()[int(line) - 1]


def test_a_defined_flag_whose_value_breaks_a_hook_constraint_is_rejected_with_the_citation(sglang_wheel_root):
    review = review_flags([FlagProposal(flag="--speculative-algorithm", value="STANDALONE"),
                           FlagProposal(flag="--mem-fraction-static", value="0.85")],
                          sglang_wheel_root / "sglang", sglang_wheel_root, False, model=DSV4)
    assert review.architecture == "DeepseekV4ForCausalLM" and review.architecture_decided_by == "model name"
    assert "matched from the model name to sglang/srt/models/" in review.constraints
    verdict = review.rejected[0]
    assert verdict.flag == "--speculative-algorithm" and verdict.origin is None
    assert "only EAGLE, DSPARK" in verdict.reason and "deepseek_v4_hook.py:" in verdict.reason
    assert "--accept-unsupported-flags" in verdict.reason
    cited = _cited_line(sglang_wheel_root, verdict.violates[0])
    assert "speculative_algorithm" in cited  # the citation points at the hook's own check
    assert list(review.accepted) == ["--mem-fraction-static"]
    assert "deepseek_v4_hook.py" in review_markdown(review) and "NOT written" in review_markdown(review)


def test_topk_other_than_one_is_rejected_for_dsv4_and_aliases_are_resolved_first(sglang_wheel_root):
    proposals = [FlagProposal(flag="--speculative-algorithm", value="NEXTN"),  # an alias of EAGLE: allowed
                 FlagProposal(flag="--speculative-num-steps", value="3"),
                 FlagProposal(flag="--speculative-eagle-topk", value="4"),
                 FlagProposal(flag="--speculative-num-draft-tokens", value="4")]
    review = review_flags(proposals, sglang_wheel_root / "sglang", sglang_wheel_root, False,
                          architecture=Architecture(name="DeepseekV4ForCausalLM", decided_by="--arch"))
    assert "architecture DeepseekV4ForCausalLM (given with --arch)" in review.constraints
    assert [v.flag for v in review.rejected] == ["--speculative-eagle-topk"]
    assert "must be 1" in review.rejected[0].reason and "deepseek_v4_hook.py:" in review.rejected[0].reason
    # the same proposal for an architecture without that rule passes
    other = review_flags(proposals, sglang_wheel_root / "sglang", sglang_wheel_root, False,
                         architecture=Architecture(name="LlamaForCausalLM", decided_by="--arch"))
    assert other.rejected == []


def test_acceptance_option_passes_a_constraint_violation_but_keeps_the_citation(sglang_wheel_root):
    review = review_flags([FlagProposal(flag="--speculative-algorithm", value="NGRAM")],
                          sglang_wheel_root / "sglang", sglang_wheel_root, True, model=DSV4)
    verdict = review.verdicts[0]
    assert verdict.verdict == "accepted_by_user" and "deepseek_v4_hook.py:" in verdict.violates[0]
    assert review.accepted == {"--speculative-algorithm": {"value": "NGRAM", "origin": verdict.origin}}


def test_a_source_without_hooks_says_values_were_not_checked(tmp_path, sglang_wheel_root):
    import shutil

    fields = tmp_path / "sglang/srt/arg_groups/fields"
    shutil.copytree(sglang_wheel_root / "sglang/srt/arg_groups/fields", fields)
    review = review_flags([FlagProposal(flag="--mem-fraction-static", value="0.8")], tmp_path / "sglang", tmp_path,
                          False, model=DSV4)
    assert list(review.accepted) == ["--mem-fraction-static"]
    assert review.constraints.startswith("values not checked against constraints:")
