"""The lm-eval adapter: its command line, offline environment and result parsing."""

import json
import sys

import pytest

from model_optimizer.errors import UsageError
from model_optimizer.quality.config import LmEvalConfig
from model_optimizer.quality.lmeval import LmEvalError, build_argv, parse_results


def test_argv_points_local_completions_at_the_server_with_the_local_tokenizer(tmp_path):
    config = LmEvalConfig(("mopt_tiny_tasks", "gsm8k"), "/tasks", limit=20, num_fewshot=0)
    argv = build_argv("http://127.0.0.1:8000/", "tiny", "/models/tiny", config,
                      tmp_path, seed=3)
    assert argv[:4] == [sys.executable, "-m", "lm_eval", "run"]
    args = {flag: argv[i + 1] for i, flag in enumerate(argv[:-1])
            if flag.startswith("--") and not argv[i + 1].startswith("--")}
    assert "--log_samples" in argv
    assert args["--model"] == "local-completions"
    model_args = dict(kv.split("=", 1) for kv in args["--model_args"].split(","))
    assert model_args["base_url"] == "http://127.0.0.1:8000/v1/completions"
    assert model_args["tokenizer"] == "/models/tiny"
    assert model_args["tokenizer_backend"] == "huggingface" and model_args["model"] == "tiny"
    assert args["--tasks"] == "mopt_tiny_tasks,gsm8k" and args["--include_path"] == "/tasks"
    assert (args["--limit"], args["--num_fewshot"], args["--seed"]) == ("20", "0", "3")
    chat = build_argv("http://h:1", "tiny", "/t", LmEvalConfig(("x",)), tmp_path, 0, chat=True)
    assert "local-chat-completions" in chat and "--apply_chat_template" in chat
    assert any("base_url=http://h:1/v1/chat/completions" in a for a in chat)


def test_values_that_would_break_model_args_are_refused(tmp_path):
    with pytest.raises(UsageError, match="cannot hold"):
        build_argv("http://h:1", "a,b", "/t", LmEvalConfig(("x",)), tmp_path, 0)


def test_results_are_parsed_from_the_newest_results_file(tmp_path):
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps({
        "results": {"mopt_tiny_tasks": {"name": "mopt_tiny_tasks", "alias": "mopt_tiny_tasks",
                                        "sample_len": 40, "exact_match,none": 0.75,
                                        "exact_match_stderr,none": 0.07}},
        "n-samples": {"mopt_tiny_tasks": {"original": 40, "effective": 40}}}))
    [score] = parse_results(tmp_path)
    assert (score.task, score.metric, score.value, score.stderr, score.samples) == (
        "mopt_tiny_tasks", "exact_match,none", 0.75, 0.07, 40)
    with pytest.raises(LmEvalError, match="no results file"):
        parse_results(tmp_path / "empty")


@pytest.mark.slow
@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_a_local_jsonl_task_runs_offline_against_an_openai_server(tmp_path, tiny_model_dir):
    """The real lm-eval child process, offline, on the shipped local task, against mopt's
    OpenAI-compatible mock server (its answers are filler words, so the score is 0; the real
    vLLM server's is tests/integration/test_quality.py)."""
    from pathlib import Path

    from model_optimizer.load.mock_server import MockServer
    from model_optimizer.quality.lmeval import run_lm_eval

    tasks = Path(__file__).resolve().parents[3] / "examples" / "quality" / "lm_eval"
    config = LmEvalConfig(("mopt_tiny_tasks",), str(tasks), limit=5, timeout_s=600)
    with MockServer(ttft_s=0.0, itl_s=0.0) as server:
        [score] = run_lm_eval(server.url, "mock-model", str(tiny_model_dir), config,
                              tmp_path / "out", seed=0)
        sent = [p for p in server.counters.payloads if "prompt" in p]
    assert (score.task, score.samples, score.value) == ("mopt_tiny_tasks", 5, 0.0)
    assert score.metric == "exact_match,none"
    assert sent and sent[0]["prompt"].startswith("count from") and sent[0]["temperature"] == 0
    assert (tmp_path / "out" / "lm_eval.log").is_file()
