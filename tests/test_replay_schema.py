"""The documented trace format matches the models, and real traces match the format."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.run import trace_schema
from agent.run.trace_schema import EVENT_MODELS, Envelope, EventError, json_schema, validate_event

ROOT = Path(__file__).parent.parent


def test_schema_doc_is_generated_from_the_models():
    committed = json.loads((ROOT / "docs" / "trace.schema.json").read_text())
    assert committed == json_schema(), "regenerate: python -m agent.run.trace_schema > docs/trace.schema.json"


def test_every_event_model_is_a_type_the_writer_takes():
    """The writer's types are read off the models (one edit adds a type): none may be missed, such as a
    model made from another event's model rather than from the envelope."""
    models = {m for m in vars(trace_schema).values() if isinstance(m, type) and issubclass(m, Envelope)}
    assert models - {Envelope} == set(EVENT_MODELS.values())
    assert len(EVENT_MODELS) == len(models - {Envelope})


@pytest.mark.parametrize("name", ["playbook-mtp-tune", "llm-mtp"])
def test_golden_events_validate(name):
    for line in (ROOT / "tests" / "golden" / name / "trace.jsonl").read_text().splitlines():
        validate_event(json.loads(line))


def test_bad_events_name_the_problem():
    base = {"v": 1, "seq": 0, "t": 1.0, "mono": 1.0, "pid": 1, "lane": "gpu"}
    with pytest.raises(EventError, match="tool_result event: field 'status'"):
        validate_event({**base, "type": "tool_result", "tool": "x"})
    with pytest.raises(EventError, match="unknown event type 'explode'"):
        validate_event({**base, "type": "explode"})
    with pytest.raises(EventError, match="predates versioned traces"):
        validate_event({**{k: v for k, v in base.items() if k != "v"}, "type": "progress", "message": "m"})
