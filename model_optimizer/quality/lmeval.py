"""Adapter for EleutherAI's lm-evaluation-harness (``lm-eval`` on PyPI) against a served
endpoint.

lm-eval runs in a child process (``python -m lm_eval run``, an argument list, never a shell)
with its ``local-completions`` model (``local-chat-completions`` for chat) pointed at the
server's ``/v1/completions``. Its tokenizer is the deployment's local tokenizer folder
(``tokenizer_backend=huggingface``). Nothing is downloaded: the child runs with
``HF_HUB_OFFLINE=1``, ``HF_DATASETS_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` and a
private datasets cache, so standard tasks (MMLU, GSM8K, HumanEval subsets) run only when
their data is already on the machine, and a local task works offline: a YAML file in
lm-eval's task format whose ``dataset_path: json`` reads a JSONL file
(``dataset_kwargs.data_files``). mopt starts lm-eval in the ``include_path`` folder, so
relative data files resolve from the task's own folder (``examples/quality/`` ships one).

The result is each task's metrics (value and standard error) as lm-eval reports them; the
per-sample log (``--log_samples``) stays in the eval archive under ``lm_eval/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.errors import MoptError, UsageError
from model_optimizer.quality.config import LmEvalConfig

OUTPUT_TAIL_CHARS = 4000
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}


class LmEvalError(MoptError):
    """lm-eval failed; the message holds the end of its output."""


@dataclass
class TaskScore:
    """One lm-eval task's headline metric (the first one it reports) and all its metrics."""

    task: str
    metric: str
    value: float
    stderr: float | None
    samples: int | None
    metrics: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON form."""
        return {"task": self.task, "metric": self.metric, "value": self.value,
                "stderr": self.stderr, "samples": self.samples, "metrics": self.metrics}


def lm_eval_available() -> bool:
    """True when lm-eval is importable in this environment."""
    import importlib.util

    return importlib.util.find_spec("lm_eval") is not None


def build_argv(base_url: str, model: str, tokenizer_dir: str, config: LmEvalConfig,
               output_dir: Path, seed: int, chat: bool = False) -> list[str]:
    """The lm-eval command line for ``config`` against ``base_url``."""
    for value in (model, tokenizer_dir, base_url):
        if "," in value or "=" in value:
            raise UsageError(f"lm-eval model arguments cannot hold ',' or '=': {value!r}")
    endpoint = "/v1/chat/completions" if chat else "/v1/completions"
    model_args = ",".join([
        f"model={model}", f"base_url={base_url.rstrip('/')}{endpoint}",
        f"tokenizer={tokenizer_dir}", "tokenizer_backend=huggingface",
        "tokenized_requests=False", "num_concurrent=1", "max_retries=2"])
    argv = [sys.executable, "-m", "lm_eval", "run",
            "--model", "local-chat-completions" if chat else "local-completions",
            "--model_args", model_args, "--tasks", ",".join(config.tasks),
            "--output_path", str(output_dir), "--log_samples", "--seed", str(seed)]
    if chat:
        argv.append("--apply_chat_template")
    if config.include_path:
        argv += ["--include_path", config.include_path]
    if config.limit is not None:
        argv += ["--limit", str(config.limit)]
    if config.num_fewshot is not None:
        argv += ["--num_fewshot", str(config.num_fewshot)]
    return argv


def parse_results(output_dir: Path) -> list[TaskScore]:
    """The task scores of the newest ``results_*.json`` lm-eval wrote under ``output_dir``."""
    files = sorted(output_dir.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise LmEvalError(f"lm-eval wrote no results file under {output_dir}")
    data = json.loads(files[-1].read_text(encoding="utf-8"))
    samples = data.get("n-samples") or {}
    scores = []
    for task, metrics in (data.get("results") or {}).items():
        values = {k: v for k, v in metrics.items()  # "metric,filter" keys only
                  if "," in k and "_stderr" not in k
                  and isinstance(v, int | float) and not isinstance(v, bool)}
        if not values:
            continue
        metric = next(iter(values))
        stderr = metrics.get(metric.replace(",", "_stderr,", 1))
        scores.append(TaskScore(task, metric, float(values[metric]),
                                stderr if isinstance(stderr, int | float) else None,
                                (samples.get(task) or {}).get("effective"), values))
    return scores


def run_lm_eval(base_url: str, model: str, tokenizer_dir: str, config: LmEvalConfig,
                output_dir: Path, seed: int = 0, chat: bool = False) -> list[TaskScore]:
    """Run lm-eval's tasks against the endpoint; write its output under ``output_dir``."""
    if not lm_eval_available():
        raise UsageError("quality.lm_eval needs lm-eval: pip install 'lm-eval[api]' "
                         "(the [quality] extra installs it)")
    output_dir.mkdir(parents=True, exist_ok=True)
    argv = build_argv(base_url, model, tokenizer_dir, config, output_dir, seed, chat)
    with tempfile.TemporaryDirectory(prefix="mopt-lmeval-") as cache:
        env = {**os.environ, **OFFLINE_ENV, "HF_DATASETS_CACHE": cache,
               "HF_HOME": os.environ.get("HF_HOME", str(Path(cache) / "hf"))}
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=env,
                                  cwd=config.include_path or None, timeout=config.timeout_s)
        except subprocess.TimeoutExpired:
            raise LmEvalError(f"lm-eval did not finish within {config.timeout_s:.0f} s "
                              "(quality.lm_eval.timeout_s)") from None
    (output_dir / "lm_eval.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-OUTPUT_TAIL_CHARS:]
        raise LmEvalError(f"lm-eval exited with {proc.returncode}:\n{tail}")
    return parse_results(output_dir)
