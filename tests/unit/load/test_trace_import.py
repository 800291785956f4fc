"""LiteLLM StandardLoggingPayload logs imported as traces (`mopt workload import`)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import EXIT_USAGE, UsageError
from model_optimizer.load.trace import read_trace
from model_optimizer.load.trace_import import import_litellm


def payload(start: float, messages, prompt: int, completion: int, **extra) -> dict:
    return {"id": f"call-{start}", "call_type": "acompletion", "status": "success",
            "startTime": start, "endTime": start + 1.5, "prompt_tokens": prompt,
            "completion_tokens": completion, "total_tokens": prompt + completion,
            "model": "openai/tiny", "model_group": "tiny-chat", "messages": messages,
            "metadata": {}, **extra}


def test_a_chat_logged_by_litellm_becomes_sessions_with_their_new_turns(tmp_path):
    first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    second = [*first, {"role": "assistant", "content": "Hello!"},
              {"role": "user", "content": "Tell me a joke"}]
    calls = [payload(1000.5, second, 40, 12),  # out of order: gateways log at completion
             payload(1000.0, first, 20, 6),
             payload(1001.0, [{"role": "user", "content": "other"}], 5, 3, status="failure"),
             payload(1002.0, [{"role": "user", "content": "lone question"}], 9, 4,
                     metadata={"requester_metadata": {"session_id": "abc"}})]
    log, out = tmp_path / "litellm.jsonl", tmp_path / "trace.jsonl"
    log.write_text("".join(json.dumps(call) + "\n" for call in calls))
    assert import_litellm(log, out) == (3, 1)
    trace = read_trace(out)
    opening, follow_up, lone = trace.entries
    assert [e.at_s for e in trace.entries] == [0.0, 0.5, 2.0]
    assert opening.prompt == "Be brief.\n\nHi there" and opening.output_tokens == 6
    assert follow_up.prompt == "Tell me a joke" and follow_up.previous == 0
    assert follow_up.session == opening.session and lone.session == "abc"
    assert {e.request_class for e in trace.entries} == {"tiny-chat"}


def test_redacted_messages_keep_the_turns_new_tokens(tmp_path):
    calls = [payload(5.0, "redacted-by-litellm", 300, 50, metadata={"session_id": "s"}),
             payload(9.0, "redacted-by-litellm", 380, 20, metadata={"session_id": "s"}),
             payload(9.5, None, 77, 8)]
    log, out = tmp_path / "log.jsonl", tmp_path / "trace.jsonl"
    log.write_text("".join(json.dumps(call) + "\n" for call in calls))
    import_litellm(log, out)
    entries = read_trace(out).entries
    assert [e.prompt_tokens for e in entries] == [300, 380 - (300 + 50), 77]
    assert entries[1].previous == 0 and entries[2].session is None


@pytest.mark.parametrize(("line", "words"), [
    ("{oops", "not valid JSON"),
    (json.dumps({"status": "success", "prompt_tokens": 1, "completion_tokens": 1}),
     "'startTime' must be epoch seconds"),
    (json.dumps({"startTime": 1.0, "prompt_tokens": "x", "completion_tokens": 1}),
     "'prompt_tokens' must be a whole number"),
])
def test_bad_log_lines_name_their_line(tmp_path, line, words):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(payload(1.0, None, 3, 3)) + "\n" + line + "\n")
    with pytest.raises(UsageError, match=rf"{log}:2: .*{words}"):
        import_litellm(log, tmp_path / "out.jsonl")
    result = CliRunner().invoke(app, ["workload", "import", str(log), "-o",
                                      str(tmp_path / "out.jsonl")])
    assert result.exit_code == EXIT_USAGE and f"{log}:2:" in result.output
