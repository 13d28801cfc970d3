"""The checkpoint in hand decides which drafter "enable MTP" switches on, read from the real config.json
files in ../shared/checkpoints (and tensor-name lists of real checkpoints) against the real sglang 0.5.23
source, through the CLI: EAGLE only where an MTP head is carried or presumed, DSPARK for a bundled DSpark
drafter, --mtp-steps for a drafter the checkpoint lacks refused before any run, SGLang's own resolver and
the draft layout in --verify, and bad checkpoints as one line."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli
from tests.conftest import CHECKPOINT_NAMES, shared_checkpoints
from tests.messages import assert_refusal

DSPARK = {"DeepSeek-V4-Flash-0731", "0xSero--DeepSeek-V4-Flash-0731-REAP", "DeepSeek-V4-Pro-0813",
          "DeepSeek-V4.1-Flash"}
COLD_SGLANG = pytest.mark.timeout(900)  # SGLang's import reads about 2 GB cold (tests/test_evidence_verify.py)


def _mtp(tmp_path: Path, wheel: Path, model_path: Path, *extra: str, model: str | None = None) -> dict:
    out = run_cli("mtp", "--sglang", str(wheel), "--model", model or f"deepseek-ai/{model_path.name}",
                  "--model-path", str(model_path), "--json", *extra, cwd=tmp_path)
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _with_index(folder: Path, config_of: str, names_of: list[str]) -> Path:
    """A checkpoint folder: a real config.json and an index listing real tensor names (no weights)."""
    folder.mkdir()
    shutil.copy(shared_checkpoints() / config_of / "config.json", folder / "config.json")
    names = [n for source in names_of for n in (shared_checkpoints() / source / "weight_names.txt").read_text().split()]
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names}}))
    return folder


@pytest.mark.parametrize("name", CHECKPOINT_NAMES)
def test_each_real_checkpoint_gets_the_drafter_it_carries(tmp_path, sglang_wheel_root, name):
    answer = _mtp(tmp_path, sglang_wheel_root, shared_checkpoints() / name)
    flags = answer["recommended"]["flags"]
    drafters = {d["kind"]: d for d in answer["checkpoint"]["drafters"]}
    if name in DSPARK:
        config = json.loads((shared_checkpoints() / name / "config.json").read_text())
        block = (config.get("text_config") or config)["dspark_block_size"]
        assert flags["--speculative-algorithm"] == "DSPARK" and flags["--speculative-dspark-block-size"] == str(block)
        assert drafters["dspark"]["carried"] is True and drafters["mtp_head"]["carried"] is not True
        why = " ".join(answer["recommended"]["rationale"])
        assert "MTP for this checkpoint means the drafter it carries: a bundled DSpark drafter" in why
    else:
        assert flags["--speculative-algorithm"] == "EAGLE"
        assert drafters["mtp_head"]["carried"] is True and drafters["mtp_head"]["presumed"] is True
        assert drafters.get("dspark", {}).get("carried") in (None, False)
    assert answer["architecture"] == answer["checkpoint"]["architecture"]


def test_v41_is_served_as_deepseek_v4_through_its_nested_config(tmp_path, sglang_wheel_root):
    answer = _mtp(tmp_path, sglang_wheel_root, shared_checkpoints() / "DeepSeek-V4.1-Flash")
    facts = answer["checkpoint"]
    assert facts["written_architecture"] == "DeepseekV41ForCausalLM" and facts["nested"] is True
    assert answer["architecture"] == "DeepseekV4ForCausalLM"
    assert facts["quantization"]["weight_block_size"] == [32, 32]
    assert any(c.startswith("config.json:text_config.dspark_") for c in
               next(d for d in facts["drafters"] if d["kind"] == "dspark")["cites"])


def test_tensor_names_decide_the_drafter_not_num_nextn_predict_layers(tmp_path, sglang_wheel_root):
    preview = _with_index(tmp_path / "preview", "DeepSeek-V4-Flash", ["DeepSeek-V4-Flash"])
    found = _mtp(tmp_path, sglang_wheel_root, preview, model="deepseek-ai/DeepSeek-V4-Flash")
    head = next(d for d in found["checkpoint"]["drafters"] if d["kind"] == "mtp_head")
    assert found["recommended"]["flags"]["--speculative-algorithm"] == "EAGLE"
    assert head["carried"] is True and head["presumed"] is False
    assert "model.safetensors.index.json:mtp.0.e_proj" in " ".join(head["cites"])
    # the 0731 layout by name: DSpark stages in mtp.*, no e_proj/h_proj/enorm/hnorm
    dspark = _with_index(tmp_path / "dspark", "DeepSeek-V4-Flash-0731", ["0xSero--DeepSeek-V4-Flash-0731-REAP"])
    found = _mtp(tmp_path, sglang_wheel_root, dspark, model="deepseek-ai/DeepSeek-V4-Flash-0731")
    head = next(d for d in found["checkpoint"]["drafters"] if d["kind"] == "mtp_head")
    assert found["recommended"]["flags"]["--speculative-algorithm"] == "DSPARK"
    assert head["carried"] is False and "lists no tensor for e_proj" in head["how"]
    # a preview config over DSpark tensors: no MTP head, and no DSpark keys for SGLang to load one by
    lying = _with_index(tmp_path / "lying", "DeepSeek-V4-Flash", ["0xSero--DeepSeek-V4-Flash-0731-REAP"])
    found = _mtp(tmp_path, sglang_wheel_root, lying, model="deepseek-ai/DeepSeek-V4-Flash")
    assert found["recommended"] is None
    assert any("does not carry an MTP (NextN) head" in u or "MTP" in u for u in found["unknowns"]), found["unknowns"]


def test_a_checkpoint_with_both_drafters_measures_both(tmp_path, sglang_wheel_root):
    from tools.mtp.settings import MtpSettingsArgs, mtp_settings

    both = _with_index(tmp_path / "both", "DeepSeek-V4-Flash-0731",
                       ["DeepSeek-V4-Flash", "0xSero--DeepSeek-V4-Flash-0731-REAP"])
    judged = mtp_settings(MtpSettingsArgs(model="deepseek-ai/DeepSeek-V4-Flash-0731", model_path=str(both),
                                          sglang=str(sglang_wheel_root)))
    algorithms = {c.flags["--speculative-algorithm"] for c in judged.choices}
    assert algorithms == {"DSPARK", "EAGLE"}, [c.flags for c in judged.choices]


def test_mtp_steps_for_a_missing_mtp_head_stops_before_any_run(tmp_path, sglang_wheel_root):
    out = run_cli("enable MTP", "--sglang", str(sglang_wheel_root), "--model", "deepseek-ai/DeepSeek-V4-Flash-0731",
                  "--model-path", str(shared_checkpoints() / "DeepSeek-V4-Flash-0731"), "--mtp-steps", "3",
                  "--plan-only", cwd=tmp_path)
    assert_refusal(out, "--mtp-steps 3", "MTP (NextN) head", "config.json:num_nextn_predict_layers", "drop --mtp-steps")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_without_a_checkpoint_the_answer_says_what_it_assumed(tmp_path, sglang_wheel_root):
    out = run_cli("mtp", "--sglang", str(sglang_wheel_root), "--model", "deepseek-ai/DeepSeek-V4-Flash", "--json",
                  cwd=tmp_path)
    answer = json.loads(out.stdout)
    assert answer["checkpoint"] is None
    assert any(r.startswith("checkpoint not read (no --model-path") and "resume" in r
               for r in answer["recommended"]["rationale"])


def test_the_evidence_leads_with_the_checkpoint_and_folds_the_rest(tmp_path, sglang_wheel_root):
    out = run_cli("mtp", "--sglang", str(sglang_wheel_root), "--model", "deepseek-ai/DeepSeek-V4-Flash-0731",
                  "--model-path", str(shared_checkpoints() / "DeepSeek-V4-Flash-0731"), cwd=tmp_path)
    lines = out.stdout.splitlines()
    assert lines[2].startswith("checkpoint ") and "carries a bundled DSpark drafter" in out.stdout
    assert lines.index("Recommended") > 2
    bearing = next(line for line in lines if line.startswith("Constraints that bear on this setting"))
    shown, total = (int(x) for x in bearing.split("(")[1].rstrip(")").split(" of "))
    assert shown < total / 4
    assert any(line.startswith(f"{total - shown} more constraints that do not bear") for line in lines)
    assert "DFLASH" not in out.stdout.split("Constraints that bear")[1].split("more constraints")[0]


@pytest.mark.parametrize("case", ["not JSON", "1 GB", "FIFO"])
def test_a_config_that_cannot_be_read_is_one_line_and_exit_2(tmp_path, sglang_wheel_root, case):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    config = folder / "config.json"
    if case == "not JSON":
        config.write_text('{"architectures": [')
    elif case == "1 GB":
        with open(config, "wb") as handle:
            handle.truncate(1024 ** 3)  # sparse: no disk is used
    else:
        os.mkfifo(config)
    out = run_cli("mtp", "--sglang", str(sglang_wheel_root), "--model", "deepseek-ai/DeepSeek-V4-Flash",
                  "--model-path", str(folder), cwd=tmp_path)
    assert_refusal(out, config, "checkpoint download", quiet=True)


def test_an_index_that_lies_is_named_and_not_trusted(tmp_path, sglang_wheel_root):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    shutil.copy(shared_checkpoints() / "DeepSeek-V4-Flash" / "config.json", folder / "config.json")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"mtp.0.e_proj.weight": 7}}))
    answer = _mtp(tmp_path, sglang_wheel_root, folder, model="deepseek-ai/DeepSeek-V4-Flash")
    assert any("not tensor name -> shard file" in u for u in answer["checkpoint"]["unknowns"])
    head = next(d for d in answer["checkpoint"]["drafters"] if d["kind"] == "mtp_head")
    assert head["presumed"] is True  # decided as without an index, never from the crafted names


@COLD_SGLANG
def test_verify_resolves_each_real_checkpoint_with_sglang_and_says_what_it_verified(tmp_path, sglang_wheel_root,
                                                                                    sglang_python):
    from tools.mtp.verify import VerifyArgs, verify_many

    answers = {name: _mtp(tmp_path, sglang_wheel_root, shared_checkpoints() / name) for name in CHECKPOINT_NAMES}
    indexed = _with_index(tmp_path / "indexed", "DeepSeek-V4-Flash-0731", ["0xSero--DeepSeek-V4-Flash-0731-REAP"])
    answers["indexed"] = _mtp(tmp_path, sglang_wheel_root, indexed, model="deepseek-ai/DeepSeek-V4-Flash-0731")
    from tools.checkpoint.facts import CheckpointFacts

    requests = [VerifyArgs(sglang_python=str(sglang_python), flags=a["recommended"]["flags"],
                           model_path=a["checkpoint"]["folder"], checkpoint=CheckpointFacts(**a["checkpoint"]))
                for a in answers.values()]
    verdicts = dict(zip(answers, verify_many(requests), strict=True))
    for name, verdict in verdicts.items():
        if name == "DeepSeek-V3.2":  # SGLang's V3.2 argument hooks ask the CUDA driver: named, not hidden
            assert verdict.status == "not_verified" and "NVIDIA driver" in verdict.reason, verdict
            continue
        assert verdict.status == "verified", (name, verdict.reason, verdict.mismatches)
        if answers[name]["recommended"]["flags"]["--speculative-algorithm"] == "DSPARK":
            assert verdict.resolved.speculative_num_draft_tokens == 6 and verdict.resolved.speculative_num_steps == 1
    assert verdicts["indexed"].draft_layout == "verified"
    assert verdicts["indexed"].line().startswith("flags and draft layout verified by SGLang 0.5.23")
    plain = verdicts["DeepSeek-V4-Flash-0731"]
    assert plain.draft_layout == "not_verified" and "no model.safetensors.index.json" in plain.line()
    assert not plain.line().startswith("flags and draft layout")


def test_a_campaign_on_the_0731_checkpoint_serves_and_measures_its_dspark_drafter(tmp_path, sglang_wheel_root):
    from tests.campaign_fixtures import DOUBLES, campaign_env
    from tests.cli_helpers import only_run
    from tests.doubles.tokenizer import build_tokenizer

    checkpoint = build_tokenizer(tmp_path / "DeepSeek-V4-Flash-0731")
    shutil.copy(shared_checkpoints() / "DeepSeek-V4-Flash-0731" / "config.json", checkpoint / "config.json")
    out = run_cli("enable MTP", "--sglang", str(sglang_wheel_root), "--sglang-python", str(DOUBLES / "sglang_python"),
                  "--model", "deepseek-ai/DeepSeek-V4-Flash-0731", "--model-path", str(checkpoint),
                  "--tokenizer", str(checkpoint), "--concurrency", "1,4", "--input-len", "8", "--output-len", "24",
                  "--prompts-per-concurrency", "2", "--min-prompts", "4", cwd=tmp_path,
                  env=campaign_env(tmp_path, gpus=1))
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    serve = {p.name: p.read_text() for p in run.glob("serve_*.sh")}
    speculative = [text for text in serve.values() if "--speculative-algorithm" in text]
    assert speculative and all("args+=(--speculative-algorithm DSPARK)" in text and
                               "--speculative-algorithm EAGLE" not in text for text in speculative), serve
    assert any("--speculative-dspark-block-size 5" in text for text in speculative)
    points = [json.loads(line) for line in (run / "bench" / "mtp.jsonl").read_text().splitlines() if line.strip()]
    assert {p["tag"].split("-r")[0] for p in points} == {"mtp-c1", "mtp-c4"}  # every repeat of both levels
    assert all(p["server_info"]["speculative_algorithm"] == "DSPARK" for p in points)
    assert all(p["server_info"]["speculative_num_draft_tokens"] == 6 for p in points)  # block 5 + 1, as SGLang
    report = (run / "report.md").read_text()
    assert "MTP for this checkpoint means the drafter it carries: a bundled DSpark drafter" in report


def test_the_llm_flag_guard_refuses_a_drafter_the_checkpoint_lacks(sglang_wheel_root):
    from agent.campaign.llm.flag_guard import FlagProposal, review_flags
    from tools.checkpoint.read import ReadCheckpointArgs, read_checkpoint
    from tools.checkpoint.architecture import decide_architecture

    facts = read_checkpoint(ReadCheckpointArgs(model_path=str(shared_checkpoints() / "DeepSeek-V4-Flash-0731"),
                                               package_dir=str(sglang_wheel_root / "sglang")))
    decided = decide_architecture("deepseek-ai/DeepSeek-V4-Flash-0731", None, facts)
    eagle = [FlagProposal(flag="--speculative-algorithm", value="EAGLE")]
    review = review_flags(eagle, sglang_wheel_root / "sglang", sglang_wheel_root, False,
                          model="deepseek-ai/DeepSeek-V4-Flash-0731", architecture=decided, checkpoint=facts)
    assert [v.verdict for v in review.verdicts] == ["rejected"]
    assert "not shown to carry an MTP (NextN) head" in review.verdicts[0].reason
    dspark = [FlagProposal(flag="--speculative-algorithm", value="DSPARK")]
    review = review_flags(dspark, sglang_wheel_root / "sglang", sglang_wheel_root, False,
                          model="deepseek-ai/DeepSeek-V4-Flash-0731", architecture=decided, checkpoint=facts)
    assert [v.verdict for v in review.verdicts] == ["supported"]
