"""New recipe revisions: values edited in place, comments kept, validated block replaced."""

from pathlib import Path

import yaml

from model_optimizer.fleet import is_fleet_file
from model_optimizer.recipe import load_recipe, load_recipe_text
from model_optimizer.recipe.writer import write_revision

ROOT = Path(__file__).resolve().parents[3]
VALIDATED = {"at": "2026-11-29T14:00:00Z", "run_id": "sweep-1", "by": "sweep",
             "metrics": {"qps": 12.5}, "vllm_version": "0.32.0", "hardware": "cpu"}


def test_revision_keeps_comments_and_bumps(tmp_path):
    source = ROOT / "recipes" / "tiny-cpu.yaml"
    loaded = load_recipe(source)
    out = tmp_path / "next.yaml"
    text = write_revision(loaded, {("engine", "max_num_seqs"): 16}, VALIDATED, out)
    assert out.read_text() == text
    again = load_recipe(out)
    assert again.resolved["revision"] == 2
    assert again.resolved["engine"]["max_num_seqs"] == 16
    assert again.resolved["validated"] == VALIDATED
    assert "# the CPU attention backend needs a multiple of 32" in text  # comments survive
    assert text.splitlines()[0] == source.read_text().splitlines()[0]
    # a second revision replaces the validated block instead of adding another
    third = write_revision(again, {("engine", "max_num_seqs"): 12},
                           {**VALIDATED, "run_id": "sweep-2"}, tmp_path / "third.yaml")
    assert third.count("validated:") == 1
    assert yaml.safe_load(third)["validated"]["run_id"] == "sweep-2"
    assert yaml.safe_load(third)["revision"] == 3


def test_missing_keys_are_inserted_and_overrides_carried(tmp_path):
    text = ("# yaml-language-server: $schema=../schemas/recipe.v1.json\n"
            "recipe_version: 1\nname: x\nmodel:\n  path: m\nengine:\n  block_size: 32\n"
            "workload:\n  num_requests: 5\n")
    path = tmp_path / "r.yaml"
    path.write_text(text)
    loaded = load_recipe(path, ["workload.concurrency=3"])
    written = write_revision(loaded, {("engine", "max_num_seqs"): 8}, VALIDATED, path)
    doc = load_recipe_text(written).resolved
    assert doc["revision"] == 2 and doc["engine"]["max_num_seqs"] == 8
    assert doc["workload"]["concurrency"] == 3 and doc["engine"]["block_size"] == 32


def test_flow_style_falls_back_to_a_clean_document(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("# head\nrecipe_version: 1\nname: x\nmodel: {path: m}\n"
                    "engine: {block_size: 32}\n")
    written = write_revision(load_recipe(path), {("engine", "max_num_seqs"): 4}, VALIDATED,
                             path)
    assert written.startswith("# head\n")
    doc = load_recipe_text(written).resolved
    assert doc["engine"] == {**doc["engine"], "max_num_seqs": 4, "block_size": 32}


def comments(text: str) -> list[str]:
    """Every comment of ``text`` (the part from '#' on; recipes here have no '#' in values)."""
    return [line[line.index("#"):].strip() for line in text.splitlines() if "#" in line]


def test_every_comment_of_the_shipped_recipes_survives_in_order(tmp_path):
    for source in sorted((ROOT / "recipes").glob("*.yaml")):
        if is_fleet_file(source):
            continue  # a fleet is not a recipe revision
        loaded = load_recipe(source)
        text = write_revision(loaded, {("engine", "max_num_seqs"): 3}, VALIDATED,
                              tmp_path / source.name)
        assert comments(text)[:len(comments(source.read_text()))] == comments(
            source.read_text()), source.name
        assert comments(text)[-1] == "# Written by mopt; do not edit by hand."
        assert load_recipe(tmp_path / source.name).resolved["engine"]["max_num_seqs"] == 3


FLOW = """\
# head
recipe_version: 1
name: x
model: {path: m, dtype: auto}   # after a flow mapping
engine: {block_size: 32}  # the CPU needs multiples of 32
tune:
  params:
    max_num_seqs: {type: int_log, low: 1, high: 32}   # after a nested flow mapping
    block_size: {type: categorical, choices: [32, 64]}   # CPU: multiples of 32
  n_trials: 4   # small
"""


def test_comments_after_flow_mappings_survive_and_flow_style_is_kept(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(FLOW)
    written = write_revision(load_recipe(path), {("engine", "max_num_seqs"): 4}, VALIDATED,
                             path)
    assert comments(written) == [*comments(FLOW), "# Written by mopt; do not edit by hand."]
    engine_line = next(line for line in written.splitlines() if line.startswith("engine:"))
    assert engine_line.startswith("engine: {") and "max_num_seqs: 4" in engine_line
    assert "# the CPU needs multiples of 32" in engine_line
    doc = load_recipe_text(written).resolved
    assert doc["engine"]["max_num_seqs"] == 4 and doc["engine"]["block_size"] == 32
    assert doc["tune"]["params"]["block_size"]["choices"] == [32, 64]


BLOCK_ENDS = """\
recipe_version: 1
name: x
model:
  path: m
engine:
  block_size: 32
  env:
    VLLM_CPU_KVCACHE_SPACE: "1"
  # closes the engine block
workload:
  num_requests: 5
sweep:
  values:
    - auto
    - fp8
  # closes the sweep block
# end of the file
"""


def test_comments_at_the_ends_of_blocks_stay_there(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(BLOCK_ENDS)
    written = write_revision(load_recipe(path), {("engine", "max_num_seqs"): 8}, VALIDATED,
                             path)
    lines = written.splitlines()
    closes = lines.index("  # closes the engine block")
    assert lines[closes + 1] == "workload:"
    assert lines[closes - 1] == '    VLLM_CPU_KVCACHE_SPACE: "1"'  # quotes kept
    assert "  max_num_seqs: 8" in lines[:closes]
    assert "    - fp8" in lines  # the file's sequence indentation
    end = lines.index("# end of the file")
    assert lines[end - 1] == "  # closes the sweep block" and lines[end + 1:end + 3] == [
        "", "# Written by mopt; do not edit by hand."]


MIDDLE_VALIDATED = """\
recipe_version: 1
name: x
revision: 4
model:
  path: m
validated:   # the old measurement
  at: '2026-01-01T00:00:00Z'
  run_id: old-run
  by: apply
  hardware: cpu
# a comment between the validated block and the SLOs
slo:
  ttft_p99_ms: 500   # interactive
"""


def test_a_new_validated_block_replaces_the_old_one_in_place(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(MIDDLE_VALIDATED)
    written = write_revision(load_recipe(path), {("engine", "max_num_seqs"): 2}, VALIDATED,
                             path)
    assert written.count("validated:") == 1 and "old-run" not in written
    assert "Written by mopt" not in written  # the block stays where it was
    lines = written.splitlines()
    between = lines.index("# a comment between the validated block and the SLOs")
    assert lines[between + 1] == "slo:" and "  ttft_p99_ms: 500   # interactive" in lines
    assert lines.index("validated:   # the old measurement") < between
    assert lines[between - 1].strip() == "hardware: cpu"
    doc = load_recipe_text(written).resolved
    assert doc["validated"] == VALIDATED and doc["revision"] == 5
    assert doc["engine"]["max_num_seqs"] == 2


def test_a_revision_nothing_measured_drops_the_validated_block_and_keeps_comments(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(BLOCK_ENDS)
    measured = write_revision(load_recipe(path), {}, VALIDATED, path)
    assert "validated:" in measured
    unmeasured = write_revision(load_recipe(path), {("model", "pins"): {"sha256": "ab" * 32}},
                                None, path)
    assert "validated" not in unmeasured and "Written by mopt" not in unmeasured
    assert comments(unmeasured) == comments(BLOCK_ENDS)
    doc = load_recipe_text(unmeasured).document
    assert doc["revision"] == 3 and "validated" not in doc
    assert doc["model"]["pins"] == {"sha256": "ab" * 32}


# ----- revision numbers under concurrent writers (hardening round 3) -------------------------
def test_a_writer_that_started_before_another_revision_writes_the_next_number(tmp_path):
    """A sweep read revision 1; a rollback wrote revision 2 meanwhile: the sweep's revision
    is 3, with a warning, and revision 2 is not overwritten."""
    import pytest

    from model_optimizer.errors import RecipeWarning

    path = tmp_path / "r.yaml"
    path.write_text((ROOT / "recipes" / "tiny-cpu.yaml").read_text()
                    .replace("../models/tiny-llama", str(ROOT / "models" / "tiny-llama")))
    sweep_started = load_recipe(path)
    write_revision(load_recipe(path), {("engine", "max_num_seqs"): 2},
                   {**VALIDATED, "run_id": "rollback"}, path)
    with pytest.warns(RecipeWarning, match="already holds revision 2.*writing revision 3"):
        text = write_revision(sweep_started, {("engine", "max_num_seqs"): 16}, VALIDATED,
                              path)
    assert yaml.safe_load(text)["revision"] == 3 == load_recipe(path).resolved["revision"]


def test_concurrent_writers_never_write_the_same_revision(tmp_path):
    import threading
    import warnings

    path = tmp_path / "r.yaml"
    path.write_text((ROOT / "recipes" / "tiny-cpu.yaml").read_text()
                    .replace("../models/tiny-llama", str(ROOT / "models" / "tiny-llama")))
    loaded = load_recipe(path)
    written, barrier = [], threading.Barrier(6)

    def writer(value):
        barrier.wait()
        text = write_revision(loaded, {("engine", "max_num_seqs"): value},
                              {**VALIDATED, "run_id": f"w{value}"}, path)
        written.append(yaml.safe_load(text)["revision"])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        threads = [threading.Thread(target=writer, args=(v,)) for v in range(1, 7)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(written) == [2, 3, 4, 5, 6, 7]
    assert load_recipe(path).resolved["revision"] == 7


def test_before_write_sees_the_text_it_replaces_under_the_lock(tmp_path):
    from model_optimizer.recipe.writer import lock_path

    path = tmp_path / "r.yaml"
    path.write_text((ROOT / "recipes" / "tiny-cpu.yaml").read_text())
    before = path.read_text()
    seen = []
    write_revision(load_recipe(path), {("engine", "max_num_seqs"): 2}, VALIDATED, path,
                   before_write=seen.append)
    assert seen == [before]
    assert lock_path(path) == tmp_path / ".r.yaml.lock"
    assert not lock_path(path).exists()  # removed when released: nothing left beside it
