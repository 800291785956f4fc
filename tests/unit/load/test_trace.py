"""Request traces: the reader (order, sessions, clock forms), and bad lines as file:line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_optimizer.errors import EXIT_USAGE, UsageError
from model_optimizer.load import trace as trace_module
from model_optimizer.load.trace import parse_speed, read_trace

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "traces" / "sessions.jsonl"


def write(tmp_path: Path, *lines: object, name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                            for line in lines))
    return path


def test_example_trace_reads_in_arrival_order_with_sessions_and_classes():
    raw = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    trace = read_trace(EXAMPLE)
    assert len(trace.entries) == len(raw)
    first = min(line["timestamp"] for line in raw)
    assert [e.at_s for e in trace.entries] == pytest.approx(
        [line["timestamp"] - first for line in raw])
    assert trace.classes == {line["class"] for line in raw}
    assert trace.sessions() == len({line["session"] for line in raw if "session" in line})
    for index, entry in enumerate(trace.entries):
        if entry.session is None:
            assert (entry.turn, entry.previous) == (0, None)
            continue
        earlier = [i for i in range(index) if trace.entries[i].session == entry.session]
        assert entry.turn == len(earlier)
        assert entry.previous == (earlier[-1] if earlier else None)


def test_out_of_order_lines_are_sorted_and_sessions_follow_time(tmp_path):
    path = write(tmp_path,
                 {"timestamp": 10.0, "prompt": "second", "output_tokens": 2, "session": "a"},
                 {"timestamp": 4.0, "prompt": "first", "output_tokens": 3, "session": "a"},
                 {"timestamp": 7.5, "prompt_tokens": 12, "output_tokens": 4})
    trace = read_trace(path)
    assert [e.line for e in trace.entries] == [2, 3, 1]
    assert [e.at_s for e in trace.entries] == [0.0, 3.5, 6.0]
    assert trace.reordered == 1
    assert trace.entries[2].previous == 0 and trace.entries[2].turn == 1
    assert trace.rate() == pytest.approx(2 / 6.0)


def test_iso_timestamps_with_zone_and_fraction(tmp_path):
    path = write(tmp_path,
                 {"timestamp": "2026-05-01T12:00:00Z", "prompt_tokens": 5, "output_tokens": 1},
                 {"timestamp": "2026-05-01T14:00:03.250+02:00", "prompt_tokens": 5,
                  "output_tokens": 1})
    assert [e.at_s for e in read_trace(path).entries] == pytest.approx([0.0, 3.25])


@pytest.mark.parametrize(("lines", "bad_line", "words"), [
    (['{"timestamp": 1, "prompt": "a", "output_tokens": 2}', "{not json"], 2, "not valid JSON"),
    ([{"prompt": "a", "output_tokens": 2}], 1, "'timestamp' is missing"),
    ([{"timestamp": "yesterday", "prompt": "a", "output_tokens": 2}], 1, "neither seconds"),
    ([{"timestamp": 1, "output_tokens": 2}], 1, "exactly one of 'prompt'"),
    ([{"timestamp": 1, "prompt": "a", "prompt_tokens": 3, "output_tokens": 2}], 1,
     "exactly one of 'prompt'"),
    ([{"timestamp": 1, "prompt": "a"}], 1, "'output_tokens' is missing"),
    ([{"timestamp": 1, "prompt_tokens": 0, "output_tokens": 2}], 1, "whole number from 1"),
    ([{"timestamp": 1, "prompt_tokens": 2.5, "output_tokens": 2}], 1, "whole number from 1"),
    ([{"timestamp": 1, "prompt": "a", "output_tokens": 2, "sesion": "x"}], 1,
     "did you mean 'session'"),
    ([{"timestamp": 1, "prompt": "a", "output_tokens": 2, "class": "no spaces"}], 1,
     "'class' must be a name"),
    ([{"timestamp": 1, "prompt": "a", "output_tokens": 2, "session": ""}], 1,
     "'session' must be an id"),
    ([{"timestamp": 1, "prompt": "a", "output_tokens": 2},
      {"timestamp": "2026-05-01T12:00:00Z", "prompt": "b", "output_tokens": 2}], 2,
     "every timestamp in one form"),
    (["[1, 2]"], 1, "expected a JSON object"),
])
def test_bad_lines_name_file_line_and_exit_2(tmp_path, lines, bad_line, words):
    path = write(tmp_path, "", *lines)  # a leading blank line: numbers count it
    with pytest.raises(UsageError) as caught:
        read_trace(path)
    assert str(caught.value).startswith(f"{path}:{bad_line + 1}: ")
    assert words in str(caught.value)
    assert caught.value.exit_code == EXIT_USAGE


def test_empty_missing_and_oversized_traces_are_usage_errors(tmp_path, monkeypatch):
    with pytest.raises(UsageError, match="holds no requests"):
        read_trace(write(tmp_path, "", "  "))
    with pytest.raises(UsageError, match="trace file not found"):
        read_trace(tmp_path / "absent.jsonl")
    line = {"timestamp": 1, "prompt_tokens": 4, "output_tokens": 1}
    path = write(tmp_path, line, line, line)
    monkeypatch.setattr(trace_module, "MAX_TRACE_LINES", 2)
    with pytest.raises(UsageError, match=rf"{path}:3: more than 2 requests"):
        read_trace(path)
    monkeypatch.setattr(trace_module, "MAX_TRACE_BYTES", path.stat().st_size - 1)
    with pytest.raises(UsageError, match="over the 0 MiB limit"):
        read_trace(path)


def test_bad_utf8_names_its_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"timestamp": 1, "prompt": "a", "output_tokens": 1}\n{"prompt": "\xff"}\n')
    with pytest.raises(UsageError, match=rf"{path}:2: not valid UTF-8"):
        read_trace(path)


@pytest.mark.parametrize(("text", "speed"), [("2x", 2.0), ("0.5x", 0.5), (3, 3.0), ("1.5", 1.5)])
def test_speed_factors(text, speed):
    assert parse_speed(text) == speed


@pytest.mark.parametrize("text", ["fast", "0x", "-2x", "inf", "nan", 0])
def test_bad_speeds_are_usage_errors(text):
    with pytest.raises(UsageError, match="not a positive factor"):
        parse_speed(text)


def test_a_recipes_trace_excludes_mix_and_dataset_and_checks_its_speed(tmp_path):
    from model_optimizer.recipe import RecipeError, load_recipe
    from tests.unit.recipe.conftest import VALID

    path = tmp_path / "r.yaml"
    path.write_text(VALID)
    loaded = load_recipe(path, ["workload.trace=t.jsonl", "workload.trace_speed=2x",
                                "slo.classes={chat: {ttft_p99_ms: 300}}"])
    assert loaded.resolved["workload"]["trace_speed"] == "2x"  # classes: checked when read
    both = tmp_path / "both.yaml"
    both.write_text(VALID.replace("  prompt_tokens: 128\n", "  prompt_tokens: 128\n"
                                  "  dataset: {path: p.jsonl}\n  trace: t.jsonl\n"))
    with pytest.raises(RecipeError, match=r"both\.yaml:\d+:\d+: workload.trace: workload.trace "
                                          "and workload.dataset exclude each other"):
        load_recipe(both)
    with pytest.raises(RecipeError, match="trace_speed"):
        load_recipe(path, ["workload.trace=t.jsonl", "workload.trace_speed=fastx"])
