"""Calibration samples for `mopt quantize`: the user's prompt file, or built-in text.

Quantizers that calibrate (GPTQ, SmoothQuant) fit their scales to the activations the
samples produce, so samples should look like the traffic the model will serve: give your
own prompt file (``quantize.calibration.file``, the JSONL format of
:mod:`model_optimizer.onboard.prompts`). Without one, mopt uses a short built-in English
text cut into overlapping passages: enough to run, not tuned to any task. Samples are drawn
with the recipe's seed, so the same recipe calibrates on the same texts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from model_optimizer.onboard.prompts import read_prompt_texts

BUILTIN_TEXT = """\
A deployment is measured, not guessed. The first run sets a baseline: how many requests
per second the server completes, how long the first token takes, how long each following
token takes, and how much memory the weights and the cache hold. Every change after that
is compared with the baseline under the same workload and the same seed.
Weight quantization stores each weight in fewer bits. Four-bit weights take a quarter of
the memory of sixteen-bit ones, which leaves room for a larger key-value cache and so for
more sequences in one batch. The price is a small change in the model's answers, which a
quality check against the unquantized model has to bound before the change is accepted.
The key-value cache keeps the attention keys and values of every token seen so far. Its
size grows with the number of layers, the number of key-value heads, the head dimension,
the sequence length and the batch. An eight-bit cache doubles the tokens that fit.
Continuous batching admits a new request as soon as another finishes. Throughput grows
with the batch until the memory bandwidth or the compute runs out; past that point, the
latency of each request grows while the throughput stays flat.
Customer: my order arrived late and the box was damaged. Can you send a replacement?
Assistant: I am sorry to hear that. I have arranged a replacement, which ships tomorrow.
Question: what is the capital of France? Answer: Paris is the capital of France.
def add(a, b):
    return a + b
Translate to French: the weather is nice today. Le temps est beau aujourd'hui.
Summarize: the meeting moved to Thursday at ten, and the budget review is postponed.
"""


@dataclass(frozen=True)
class Calibration:
    """The texts drawn, and where they came from."""

    texts: list[str]
    source: str


def builtin_passages(count: int) -> list[str]:
    """``count`` overlapping passages of the built-in text (deterministic)."""
    lines = [line for line in BUILTIN_TEXT.splitlines() if line.strip()]
    passages = []
    for index in range(count):
        start = index % len(lines)
        span = 4 + index % 5
        passages.append("\n".join((lines * 2)[start:start + span]))
    return passages


def calibration_texts(settings: dict, base_dir: Path | None) -> Calibration:
    """Texts for the ``quantize.calibration`` settings (file relative to ``base_dir``)."""
    count, seed = settings["num_samples"], settings["seed"]
    written = settings.get("file")
    if not written:
        return Calibration(builtin_passages(count), f"built-in text ({count} passages)")
    path = Path(written).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    texts = [text for text in read_prompt_texts(path) if text.strip()]
    if not texts:
        from model_optimizer.errors import UsageError

        raise UsageError(f"{path}: no non-empty prompts to calibrate on")
    if len(texts) > count:
        texts = random.Random(seed).sample(texts, count)
    return Calibration(texts, f"{len(texts)} prompts from {path} (seed {seed})")
