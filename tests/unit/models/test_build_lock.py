"""Two builders of the same tiny model take turns (two test workers, two `mopt tiny-model`)."""

from __future__ import annotations

import json
import threading
import time

from model_optimizer.models.tiny import MARKER_FILE, build_lock, built_with


def test_a_second_builder_waits_for_the_first_and_finds_its_model(tmp_path):
    out, order = tmp_path / "models" / "m", []
    marker = {"spec": 1}

    def first() -> None:
        with build_lock(out):
            order.append("first in")
            time.sleep(0.3)
            out.mkdir()
            (out / MARKER_FILE).write_text(json.dumps(marker))
            order.append("first out")

    def second() -> None:
        time.sleep(0.05)
        with build_lock(out):
            order.append(f"second in, built: {built_with(out, marker)}")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert order == ["first in", "first out", "second in, built: True"]
    assert not built_with(out, {"spec": 2})        # another spec: not this build
    assert not built_with(tmp_path / "none", marker)
