"""The recipe's ``quality:`` section as typed data, and which knobs can change outputs.

Relative paths (``baseline`` when it names a recipe file, ``eval_set``,
``lm_eval.include_path``) are resolved from the recipe file's folder, like ``model.path``;
``eval_set: mopt:general`` is the eval set shipped with mopt.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from model_optimizer.quality.client import Sampling
from model_optimizer.quality.evalset import BUILTIN_PREFIX, builtin_eval_set

#: Recipe fields whose change can change what the model answers, so a search gates them.
#: Quantization and dtype change the weights' and activations' arithmetic, kv_cache_dtype the
#: stored keys and values, speculative decoding the sampling path (exact only in theory:
#: its verification runs in another numeric precision path), the model or tokenizer the
#: whole function. Scheduling knobs (max_num_seqs, max_num_batched_tokens, block_size,
#: gpu_memory_utilization, max_model_len, enable_prefix_caching, enforce_eager) change speed,
#: not the computation; batching may still move floating-point rounding on some kernels,
#: which the eval's self-agreement figures measure.
OUTPUT_CHANGING = ("model.path", "model.revision", "model.quantization", "model.dtype",
                   "model.tokenizer", "engine.kv_cache_dtype",
                   "engine.extra_args.speculative-config")


def changes_outputs(dotted_keys: list[str] | tuple[str, ...]) -> list[str]:
    """The keys of ``dotted_keys`` (e.g. ``engine.kv_cache_dtype``) that can change outputs."""
    def gated(key: str) -> bool:
        if key.startswith("engine.extra_args.") and "speculative" in key:
            return True
        return any(key == known or key.startswith(known + ".") for known in OUTPUT_CHANGING)

    return [key for key in dotted_keys if gated(key)]


@dataclass(frozen=True)
class Thresholds:
    """Gate thresholds; None means 'not checked'."""

    min_exact_match: float | None = None
    min_top1_agreement: float | None = None
    max_mean_kl: float | None = None
    max_accuracy_drop: float | None = None

    def any(self) -> bool:
        """True when at least one threshold is set."""
        return any(v is not None for v in asdict(self).values())

    def to_dict(self) -> dict:
        """JSON form."""
        return asdict(self)


@dataclass(frozen=True)
class LmEvalConfig:
    """lm-evaluation-harness tasks to run against the served endpoint."""

    tasks: tuple[str, ...] = ()
    include_path: str | None = None
    limit: int | None = None
    num_fewshot: int | None = None
    timeout_s: float = 1800.0

    def to_dict(self) -> dict:
        """JSON form."""
        data = asdict(self)
        data["tasks"] = list(self.tasks)
        return data


@dataclass(frozen=True)
class QualityConfig:
    """Everything an eval and its gate need (the recipe's quality section, resolved)."""

    baseline: str | None = None
    eval_set: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    repeats: int = 1
    concurrency: int = 1
    request_timeout_s: float = 120.0
    lm_eval: LmEvalConfig = field(default_factory=LmEvalConfig)
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def enabled(self) -> bool:
        """True when there is something to evaluate (an eval set or lm-eval tasks)."""
        return bool(self.eval_set or self.lm_eval.tasks)

    @property
    def gate_problem(self) -> str | None:
        """Why this section cannot gate a candidate (nothing to evaluate, or no threshold to
        judge by), in words; None when it can."""
        if not self.enabled:
            return "the quality section names no eval set or lm-eval task"
        if not self.thresholds.any():
            return "the quality section sets no thresholds"
        return None

    def with_overrides(self, **changes) -> QualityConfig:
        """A copy with top-level fields replaced (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict:
        """JSON form (archived with every eval)."""
        return {"baseline": self.baseline, "eval_set": self.eval_set,
                "sampling": self.sampling.to_dict(), "repeats": self.repeats,
                "concurrency": self.concurrency, "request_timeout_s": self.request_timeout_s,
                "lm_eval": self.lm_eval.to_dict(), "thresholds": self.thresholds.to_dict()}


def _eval_set(value: str | None, base_dir: Path | None) -> str | None:
    """A file (resolved from the recipe's folder) or ``mopt:<name>``, shipped with mopt."""
    if value is not None and value.startswith(BUILTIN_PREFIX):
        return str(builtin_eval_set(value))
    return _path(value, base_dir)


def _path(value: str | None, base_dir: Path | None) -> str | None:
    if value is None or base_dir is None or Path(value).is_absolute():
        return value
    return str((base_dir / value).resolve())


def _baseline(value: str | None, base_dir: Path | None) -> str | None:
    """A recipe file is resolved from the recipe's folder; a run reference is kept as is."""
    if value is None or value.endswith((".yaml", ".yml")):
        return _path(value, base_dir)
    return value


def quality_config(resolved: dict, base_dir: Path | None = None) -> QualityConfig:
    """The QualityConfig of a resolved recipe (defaults filled by the schema)."""
    section = resolved.get("quality") or {}
    lm = section.get("lm_eval") or {}
    sampling = Sampling(seed=section.get("seed", 0),
                        temperature=section.get("temperature", 0.0),
                        top_p=section.get("top_p", 1.0),
                        max_tokens=section.get("max_tokens", 16),
                        logprobs=section.get("logprobs", 5))
    return QualityConfig(
        baseline=_baseline(section.get("baseline"), base_dir),
        eval_set=_eval_set(section.get("eval_set"), base_dir),
        sampling=sampling, repeats=section.get("repeats", 1),
        concurrency=section.get("concurrency", 1),
        request_timeout_s=section.get("request_timeout_s", 120.0),
        lm_eval=LmEvalConfig(tuple(lm.get("tasks") or ()),
                             _path(lm.get("include_path"), base_dir), lm.get("limit"),
                             lm.get("num_fewshot"), lm.get("timeout_s", 1800.0)),
        thresholds=Thresholds(**{k: v for k, v in (section.get("thresholds") or {}).items()
                                 if k in Thresholds.__dataclass_fields__}))
