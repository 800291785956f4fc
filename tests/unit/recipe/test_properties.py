"""Property-based tests: any broken recipe gives exit 2, the right file and line, no traceback,
and nothing written."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.recipe.schema import allowed_keys

ROOT = Path(__file__).resolve().parents[3]
BASE = (ROOT / "recipes" / "tiny-cpu.yaml").read_text()
LINES = BASE.splitlines()
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):(?P<rest>.*)$")
runner = CliRunner()
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _section_of(index: int) -> tuple[str, ...]:
    """The mapping path a key line belongs to (from indentation of lines above)."""
    indent = len(LINES[index]) - len(LINES[index].lstrip())
    path: list[str] = []
    for line in reversed(LINES[:index]):
        match = KEY_LINE.match(line)
        if match and len(match["indent"]) < indent:
            path.insert(0, match["key"])
            indent = len(match["indent"])
    return tuple(path)


KEY_LINES = [i for i, line in enumerate(LINES) if KEY_LINE.match(line)
             and _section_of(i) in ((), ("model",), ("engine",), ("hardware",), ("workload",),
                                    ("slo",), ("sweep",))]
SCALAR_LINES = [i for i in KEY_LINES
                if KEY_LINE.match(LINES[i])["rest"].split("#")[0].strip()]


def check_rejected(tmp_path: Path, text: bytes | str, line: int | None) -> str:
    """Validate through the CLI; assert exit 2, file:line named, no traceback, nothing written."""
    path = tmp_path / "recipe.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    before = sorted(p.name for p in tmp_path.iterdir())
    result = runner.invoke(app, ["validate", str(path)])
    output = result.output
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    location = f"{path}:{line}:" if line is not None else f"{path}"
    assert location in output, f"expected {location} in:\n{output}"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    return output


WRONG_VALUES = st.sampled_from(["[1, 2]", "{a: 1}", "not-a-number-or-choice", "-5", "1.5e9",
                                "''", "true"])


@SETTINGS
@given(index=st.sampled_from(SCALAR_LINES), value=WRONG_VALUES)
def test_wrong_values_point_at_their_line(tmp_path_factory, index, value):
    match = KEY_LINE.match(LINES[index])
    lines = list(LINES)
    lines[index] = f"{match['indent']}{match['key']}: {value}"
    text = "\n".join(lines) + "\n"
    from model_optimizer.errors import RecipeError
    from model_optimizer.recipe import load_recipe_text
    try:
        load_recipe_text(text)
    except RecipeError:
        check_rejected(tmp_path_factory.mktemp("r"), text, index + 1)
    else:
        assume(False)  # this value happens to be valid for this key


@SETTINGS
@given(index=st.sampled_from(KEY_LINES), data=st.data())
def test_misspelled_keys_get_line_and_suggestion(tmp_path_factory, index, data):
    match = KEY_LINE.match(LINES[index])
    key = match["key"]
    position = data.draw(st.integers(0, len(key) - 1))
    kind = data.draw(st.sampled_from(["drop", "swap", "double"]))
    if kind == "drop":
        wrong = key[:position] + key[position + 1:]
    elif kind == "swap" and position < len(key) - 1:
        wrong = key[:position] + key[position + 1] + key[position] + key[position + 2:]
    else:
        wrong = key[:position] + key[position] + key[position:]
    assume(wrong and wrong not in allowed_keys(_section_of(index)) and wrong[0].isalpha())
    lines = list(LINES)
    lines[index] = f"{match['indent']}{wrong}:{match['rest']}"
    output = check_rejected(tmp_path_factory.mktemp("r"), "\n".join(lines) + "\n", index + 1)
    assert f"unknown key '{wrong}'" in output
    if len(key) >= 6:
        assert f"did you mean '{key}'" in output


@SETTINGS
@given(index=st.sampled_from(KEY_LINES),
       name=st.from_regex(r"[a-z][a-z_]{2,12}", fullmatch=True))
def test_unknown_keys_are_located(tmp_path_factory, index, name):
    section = _section_of(index)
    assume(name not in allowed_keys(section))
    indent = KEY_LINE.match(LINES[index])["indent"]
    lines = list(LINES)
    lines.insert(index, f"{indent}{name}: 1")
    check_rejected(tmp_path_factory.mktemp("r"), "\n".join(lines) + "\n", index + 1)


@SETTINGS
@given(index=st.sampled_from(KEY_LINES))
def test_duplicate_keys_are_located(tmp_path_factory, index):
    lines = list(LINES)
    lines.insert(index + 1, LINES[index])
    assume(KEY_LINE.match(LINES[index])["rest"].split("#")[0].strip())  # a scalar line
    output = check_rejected(tmp_path_factory.mktemp("r"), "\n".join(lines) + "\n", index + 2)
    assert "duplicate key" in output


@SETTINGS
@given(offset=st.integers(0, len(BASE.encode()) - 1),
       junk=st.sampled_from([b"\xff", b"\xc3\x28", b"\x80\x80"]))
def test_non_utf8_bytes_are_located(tmp_path_factory, offset, junk):
    raw = BASE.encode()
    broken = raw[:offset] + junk + raw[offset:]
    line = raw[:offset].count(b"\n") + 1
    check_rejected(tmp_path_factory.mktemp("r"), broken, line)


@SETTINGS
@given(index=st.sampled_from(SCALAR_LINES),
       tag=st.sampled_from(["!!python/object/apply:os.system ['touch {marker}']",
                            "!!python/name:os.system", "!!python/object:os.stat_result {{}}"]))
def test_unsafe_tags_are_errors_not_code(tmp_path_factory, index, tag):
    folder = tmp_path_factory.mktemp("r")
    marker = folder / "pwned"
    match = KEY_LINE.match(LINES[index])
    lines = list(LINES)
    lines[index] = f"{match['indent']}{match['key']}: {tag.format(marker=marker)}"
    output = check_rejected(folder, "\n".join(lines) + "\n", index + 1)
    assert "unsafe or unknown YAML tag" in output
    assert not marker.exists()


@SETTINGS
@given(index=st.sampled_from(KEY_LINES), junk=st.sampled_from(["[", "{a: 1", "\t- x", ": :"]))
def test_broken_yaml_is_located(tmp_path_factory, index, junk):
    lines = list(LINES)
    lines.insert(index, junk)
    output = check_rejected(tmp_path_factory.mktemp("r"), "\n".join(lines) + "\n", None)
    assert "YAML syntax" in output
    assert re.search(r"recipe\.yaml:\d+:\d+: YAML syntax", output)


@SETTINGS
@given(section=st.sampled_from(["model", "name", "recipe_version"]))
def test_missing_required_fields(tmp_path_factory, section):
    kept, skipping = [], False
    for line in LINES:
        match = KEY_LINE.match(line)
        if match and not match["indent"]:
            skipping = match["key"] == section
        if not skipping:
            kept.append(line)
    output = check_rejected(tmp_path_factory.mktemp("r"), "\n".join(kept) + "\n", None)
    assert f"'{section}'" in output or f"{section} is missing" in output
