"""CI's type check (.ci/typecheck.py): mypy's errors against a baseline that only shrinks,
tested on small fake mypy outputs; and the strict flags in pyproject.toml held to mypy's
own --strict."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_checker():
    spec = importlib.util.spec_from_file_location("ci_typecheck", ROOT / ".ci" / "typecheck.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


tc = _load_checker()

OLD = ("model_optimizer/search/core/fit.py:{}: error: Incompatible types in assignment  "
       "[assignment]")
NEW = 'model_optimizer/search/tune/loop.py:7: error: Name "x" is not defined  [name-defined]'


def _check(tmp_path: Path, output: str, baseline: list[str],
           *flags: str) -> tuple[int, Path]:
    """main() on a saved mypy output and a baseline in ``tmp_path``."""
    saved, base = tmp_path / "mypy.txt", tmp_path / "baseline.txt"
    saved.write_text(output)
    base.write_text(tc.HEADER + "".join(f"{entry}\n" for entry in baseline))
    return tc.main(["--mypy-output", str(saved), "--baseline", str(base), *flags]), base


def _entry(line: str) -> str:
    return tc.parse(line)[0].entry


def test_parse_reads_errors_and_skips_notes_and_summaries():
    output = "\n".join([OLD.format(12), "model_optimizer/a.py:3: note: See docs",
                        "model_optimizer/b.py:4:9: error: Bad thing  [misc]",
                        "Found 2 errors in 2 files (checked 3 source files)"])
    errors = tc.parse(output)
    assert [(e.path, e.line) for e in errors] == [("model_optimizer/search/core/fit.py", 12),
                                                  ("model_optimizer/b.py", 4)]
    assert errors[1].message == "Bad thing  [misc]"
    assert str(errors[0]) == OLD.format(12)


def test_the_same_error_on_a_moved_line_passes(tmp_path, capsys):
    status, _ = _check(tmp_path, OLD.format(40), [_entry(OLD.format(12))])
    assert status == 0
    assert "all in the baseline" in capsys.readouterr().out


def test_a_new_error_fails_naming_its_file_line_and_the_fix(tmp_path, capsys):
    status, _ = _check(tmp_path, OLD.format(12) + "\n" + NEW, [_entry(OLD.format(12))])
    out = capsys.readouterr().out
    assert status == 1
    assert NEW in out  # file:line: error: message  [code]
    assert "annotate it" in out and "--regenerate" in out
    assert OLD.format(12) not in out


def test_one_more_of_a_listed_error_is_new(tmp_path, capsys):
    status, _ = _check(tmp_path, OLD.format(12) + "\n" + OLD.format(30),
                       [_entry(OLD.format(12))])
    out = capsys.readouterr().out
    assert status == 1
    assert OLD.format(30) in out and "(1 listed, 2 now)" in out


def test_a_fixed_error_fails_until_the_baseline_shrinks(tmp_path, capsys):
    listed = [_entry(OLD.format(12)), _entry(NEW)]
    status, base = _check(tmp_path, NEW, listed)
    out = capsys.readouterr().out
    assert status == 1
    assert "no longer occur" in out and "--shrink" in out and _entry(OLD.format(12)) in out

    status, base = _check(tmp_path, NEW, listed, "--shrink")
    assert status == 0
    assert tc.read_baseline(base.read_text()) == {_entry(NEW): 1}


def test_shrink_never_adds_a_new_error(tmp_path, capsys):
    status, base = _check(tmp_path, OLD.format(12) + "\n" + NEW, [_entry(OLD.format(12))],
                          "--shrink")
    assert status == 1
    assert _entry(NEW) not in tc.read_baseline(base.read_text())
    assert NEW in capsys.readouterr().out


def test_regenerate_lists_every_error_but_those_of_strict_modules(tmp_path):
    strict = "model_optimizer/recipe/rules.py:5: error: Missing a return type  [no-untyped-def]"
    status, base = _check(tmp_path, "\n".join([OLD.format(1), OLD.format(2), NEW, strict]), [],
                          "--regenerate")
    assert status == 1  # the strict module's error is still an error
    assert tc.read_baseline(base.read_text()) == {_entry(OLD.format(1)): 2, _entry(NEW): 1}


def test_a_baseline_entry_in_a_strict_module_fails(tmp_path, capsys):
    entry = "model_optimizer/usecase/apply.py: Missing a return type  [no-untyped-def]"
    status, _ = _check(tmp_path, "", [entry])
    assert status == 1
    assert "must be fixed, not listed" in capsys.readouterr().out


def test_line_numbers_inside_a_message_do_not_churn_the_baseline():
    first = 'model_optimizer/a.py:9: error: Name "f" already defined on line 3  [no-redef]'
    moved = 'model_optimizer/a.py:19: error: Name "f" already defined on line 13  [no-redef]'
    assert _entry(first) == _entry(moved) == (
        'model_optimizer/a.py: Name "f" already defined on line N  [no-redef]')


def test_mypy_failing_without_errors_fails_the_check(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(tc, "run_mypy", lambda: (2, "pyproject.toml: [mypy]: bad option"))
    assert tc.main(["--baseline", str(tmp_path / "none.txt")]) == 1
    assert "mypy failed (exit 2)" in capsys.readouterr().out


def test_the_committed_baseline_is_in_its_canonical_form():
    text = (ROOT / ".mypy-baseline.txt").read_text()
    entries = tc.read_baseline(text)
    assert entries and text == tc.baseline_text(entries)
    assert not [entry for entry in entries if entry.startswith(tc.STRICT_PREFIXES)]


def _strict_flags() -> dict[str, object]:
    """What mypy's --strict changes from its defaults, read from mypy itself."""
    from mypy.main import process_options

    _, default = process_options(["-c", "x"], require_targets=True)
    _, strict = process_options(["--strict", "-c", "x"], require_targets=True)
    names = [n for n in dir(strict) if not n.startswith("_")
             and not callable(getattr(strict, n))]
    return {n: getattr(strict, n) for n in names if getattr(strict, n) != getattr(default, n)}


def test_the_strict_modules_get_every_flag_of_mypys_strict(monkeypatch, tmp_path):
    pytest.importorskip("mypy")
    monkeypatch.chdir(tmp_path)  # mypy would read the repository's config
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict_section = next(o for o in config["overrides"]
                          if "model_optimizer.usecase.*" in o["module"])
    assert sorted(strict_section["module"]) == sorted(
        p.rstrip("/").replace("/", ".") + ".*" for p in tc.STRICT_PREFIXES)
    flags = _strict_flags()
    assert len(flags) >= 10  # the comparison read mypy's options
    missing = {name: value for name, value in flags.items()
               if strict_section.get(name, config.get(name)) != value}
    assert not missing, f"set these in pyproject's strict override: {missing}"
