"""The typed view of a resolved recipe: frozen pydantic models, built after validation.

``schemas/recipe.v1.json`` stays the one source of truth: it validates the file (every error
with its file:line:column, ``recipe/validate.py``) and fills the defaults (``resolve``).
Only then is the resolved dict turned into a ``RecipeSpec`` (``LoadedRecipe.spec``), the
object the stages that use a recipe read by attribute (``spec.engine.max_num_seqs``).

These classes mirror the schema by hand; ``tests/unit/recipe/test_spec_schema.py`` fails
when the two disagree (a property with no field, a field with no property, a type, enum,
required key or default that differs), so a new knob is added to both in one commit
(docs/design.md section 7). Mapping rules: ``integer`` -> int, ``number`` -> ``Number``
(int | float, so ``20`` stays ``20``), arrays -> tuples, an object with properties -> a
model, an open map -> ``dict``, an enum -> ``Literal`` (or plain ``str`` for the long lists
that mirror vLLM and the accelerator table: the schema keeps the list), an optional key
with no default -> ``None`` when absent. ``extra="forbid"`` makes a key the view does not
know an error at load instead of a silently dropped value.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from model_optimizer.recipe.sweep_rules import DEFAULT_PARAM, StrategyName

Number = int | float
Scalar = str | Number | bool


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=(),
                              populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """The dict this view was read from (JSON types: tuples as lists; keys it did not
        hold stay out), e.g. ``spec.workload.to_dict()`` for the load, which takes dicts."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class LengthDistSpec(_Spec):
    """A class length drawn from a distribution (``workload.mix.<class>.*_tokens``)."""

    dist: Literal["uniform", "normal", "lognormal"]
    min: int | None = None
    max: int | None = None
    mean: Number | None = None
    stddev: Number | None = None
    median: Number | None = None
    sigma: Number | None = None


class PinSourceSpec(_Spec):
    """``model.pins.source``: the model a checkpoint was made from."""

    path: str | None = None
    revision: str | None = None
    sha256: str | None = None


class PinsSpec(_Spec):
    """``model.pins``: what this revision was made from and validated on."""

    sha256: str | None = None
    commit: str | None = None
    files: dict[str, str] | None = None
    source: PinSourceSpec | None = None
    quantize: dict[str, Any] | None = None
    tool: str | None = None


class ModelSpec(_Spec):
    """``model``: which checkpoint, and how it is loaded."""

    path: str
    revision: str | None = None
    quantization: str = "none"  # schema enum (vLLM's methods)
    weight_bits: int | None = None
    dtype: Literal["auto", "bfloat16", "float16", "float32", "half", "float"] = "auto"
    served_name: str | None = None  # ``resolve`` fills in the recipe's name
    tokenizer: str | None = None
    trust_remote_code: bool = False
    pins: PinsSpec | None = None


class EngineSpec(_Spec):
    """``engine``: the vLLM knobs; None means vLLM's own default."""

    kv_cache_dtype: str = "auto"  # schema enum (vLLM's cache dtypes)
    block_size: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    long_prefill_token_threshold: int | None = None
    max_output_tokens: int | None = None
    gpu_memory_utilization: Number = 0.9
    enable_prefix_caching: bool | None = None
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    extra_args: dict[str, Scalar] = Field(default_factory=dict)
    env: dict[str, Scalar] = Field(default_factory=dict)
    allow_code: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 0
    startup_timeout_s: Number = 600


class PlacementSpec(_Spec):
    """``hardware.placement`` as explicit core lists (None: that part is not placed)."""

    engine: tuple[int, ...] | None = None
    server: tuple[int, ...] | None = None
    client: tuple[int, ...] | None = None


class HardwareSpec(_Spec):
    """``hardware``: what the planner plans for, and where the processes run."""

    accelerator: str = "H100"  # schema enum (plan's accelerator table)
    memory_gib: Number | None = None
    bandwidth_gbps: Number | None = None
    count: int = 1
    price_per_hour: Number | None = None
    placement: Literal["auto", "none"] | PlacementSpec = "auto"


class MixClassSpec(_Spec):
    """``workload.mix.<class>``: a request class of a synthetic mix."""

    weight: Number = 1
    prompt_tokens: int | LengthDistSpec
    output_tokens: int | LengthDistSpec


class DatasetSpec(_Spec):
    """``workload.dataset``: prompts read from a file."""

    path: str
    format: Literal["auto", "jsonl", "csv", "sharegpt"] = "auto"
    sampling: Literal["without_replacement", "with_replacement"] = "without_replacement"


class WorkloadSpec(_Spec):
    """``workload``: what the load sends and for how long."""

    endpoint: Literal["completions", "chat"] = "completions"
    prompt_tokens: int = 512
    output_tokens: int = 128
    shared_prefix_tokens: int = 0
    mix: dict[str, MixClassSpec] | None = None
    dataset: DatasetSpec | None = None
    trace: str | None = None
    trace_speed: Number | str = 1
    concurrency: int | None = None
    request_rate: Number | Literal["inf"] = "inf"
    num_requests: int | None = None
    duration_s: Number | None = 20
    target_half_width: Number | None = None
    max_duration_s: Number | None = None
    warmup_requests: int = 4
    warmup_steady_max_s: Number | None = None
    warmup_card_max_s: Number | None = 120
    request_timeout_s: Number = 300
    idle_timeout_s: Number | None = 60
    seed: int = 0
    ignore_eos: bool = True
    api_key_env: str | None = None


class ClassSloSpec(_Spec):
    """``slo.classes.<class>``: bounds laid over the run's for one request class."""

    ttft_p50_ms: Number | None = None
    ttft_p90_ms: Number | None = None
    ttft_p99_ms: Number | None = None
    tpot_p50_ms: Number | None = None
    tpot_p90_ms: Number | None = None
    tpot_p99_ms: Number | None = None
    itl_p50_ms: Number | None = None
    itl_p90_ms: Number | None = None
    itl_p99_ms: Number | None = None
    e2e_p50_ms: Number | None = None
    e2e_p90_ms: Number | None = None
    e2e_p99_ms: Number | None = None
    min_success_rate: Number | None = None
    min_qps: Number | None = None


class SloSpec(ClassSloSpec):
    """``slo``: the run's bounds, and per-class ones."""

    classes: dict[str, ClassSloSpec] | None = None

    def sets_any(self) -> bool:
        """True when the recipe sets any SLO (a bound, or a ``classes`` section)."""
        return any(value is not None for value in self.to_dict().values())


class SweepSpec(_Spec):
    """``sweep``: the one-knob search."""

    param: str = DEFAULT_PARAM
    start: Number | None = None
    growth: Number = 2
    step: Number | None = None
    max: Number | None = None
    values: tuple[Scalar, ...] | None = None
    plateau_threshold: Number = 0.05
    resolution: Number = 1
    relative_resolution: Number | None = None
    repeats: int = 1
    max_launches: int | None = 12
    budget: Number | None = 15
    confirm_duration_s: Number = 60
    objective_class: str | None = None
    strategy: StrategyName = "auto"
    remeasure_rounds: int | None = None


class TuneParamSpec(_Spec):
    """``tune.params.<knob>``: the range or choices of one knob."""

    type: Literal["int", "int_log", "float", "float_log", "categorical"]
    low: Number | None = None
    high: Number | None = None
    step: Number | None = None
    choices: tuple[Scalar, ...] | None = None


class TuneSpec(_Spec):
    """``tune``: the multi-knob (optuna) search."""

    params: dict[str, TuneParamSpec] = Field(default_factory=dict)
    objective: Literal["throughput", "goodput", "tokens_per_s"] = "throughput"
    objective_class: str | None = None
    second_objective: Literal["ttft_p99"] | None = None
    n_trials: int = 12
    max_minutes: Number | None = None
    sampler: Literal["tpe", "random", "grid"] = "tpe"
    seed: int = 0
    repeats: int = 1
    strategy: Literal["auto", "scan", "relaunch"] = "auto"


class CapacitySpec(_Spec):
    """``capacity``: the highest offered rate that meets the SLOs."""

    start_rate: Number = 1
    growth: Number = 2
    max_rate: Number | None = None
    resolution: Number = 0.1
    min_goodput_fraction: Number = 0.9
    window_s: Number = 20
    max_windows: int = 10


class CalibrationSpec(_Spec):
    """``quantize.calibration``: the calibration data."""

    file: str | None = None
    num_samples: int = 64
    max_seq_length: int = 512
    seed: int = 0


class QuantizeSpec(_Spec):
    """``quantize``: how ``mopt quantize`` makes a checkpoint."""

    scheme: Literal["w4a16", "w8a8", "fp8_dynamic", "nvfp4"] = "w4a16"
    group_size: int = 128
    smoothing_strength: Number = 0.8
    dampening_frac: Number = 0.01
    ignore: tuple[str, ...] = ("lm_head",)
    calibration: CalibrationSpec = Field(default_factory=CalibrationSpec)
    output: str | None = None
    timeout_s: Number = 7200


class CandidateSpec(_Spec):
    """``optimize.candidates[]``: one thing to try against the baseline."""

    name: str
    quantize: dict[str, Any] | None = None
    kv_cache_dtype: str | None = None


class OptimizeSpec(_Spec):
    """``optimize``: the pipeline of candidates, then a sweep."""

    candidates: tuple[CandidateSpec, ...] = (
        CandidateSpec(name="w4a16", quantize={"scheme": "w4a16"}),
        CandidateSpec(name="kv-fp8", kv_cache_dtype="fp8"))
    sweep: bool = True
    objective: Literal["qps", "goodput_qps", "output_tok_s"] = "qps"
    survivor: Literal["fastest", "best_candidate"] = "fastest"


class LmEvalSpec(_Spec):
    """``quality.lm_eval``: lm-eval tasks."""

    tasks: tuple[str, ...] = ()
    include_path: str | None = None
    limit: int | None = None
    num_fewshot: int | None = None
    timeout_s: Number = 1800


class ThresholdsSpec(_Spec):
    """``quality.thresholds``: the gate's bounds."""

    min_exact_match: Number | None = None
    min_top1_agreement: Number | None = None
    max_mean_kl: Number | None = None
    max_accuracy_drop: Number | None = None


class QualitySpec(_Spec):
    """``quality``: evals and the quality gate."""

    baseline: str | None = None
    eval_set: str | None = None
    max_tokens: int = 16
    temperature: Number = 0.0
    top_p: Number = 1.0
    seed: int = 0
    logprobs: int = 5
    repeats: int = 1
    concurrency: int = 1
    request_timeout_s: Number = 120
    lm_eval: LmEvalSpec = Field(default_factory=LmEvalSpec)
    thresholds: ThresholdsSpec = Field(default_factory=ThresholdsSpec)


class ValidatedSpec(_Spec):
    """``validated``: written only by mopt, the measurement that validated this revision."""

    at: str
    run_id: str
    by: Literal["apply", "sweep", "tune", "rollback", "quantize", "optimize"] | None = None
    rollback_of: str | None = None
    metrics: dict[str, Number | None] | None = None
    vllm_version: str | None = None
    hardware: str | None = None
    quality: dict[str, Any] | None = None
    knee: dict[str, Any] | None = None
    resolved: bool | None = None
    decision: dict[str, Any] | None = None
    load_average: dict[str, Any] | None = None
    driver: str | None = None


class RecipeSpec(_Spec):
    """A whole resolved recipe (``LoadedRecipe.spec``)."""

    json_schema: str | None = Field(None, alias="$schema")
    recipe_version: Literal[1]
    name: str
    revision: int = 1
    description: str = ""
    model: ModelSpec
    engine: EngineSpec = Field(default_factory=EngineSpec)
    hardware: HardwareSpec = Field(default_factory=HardwareSpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    slo: SloSpec = Field(default_factory=SloSpec)
    sweep: SweepSpec = Field(default_factory=SweepSpec)
    tune: TuneSpec = Field(default_factory=TuneSpec)
    capacity: CapacitySpec = Field(default_factory=CapacitySpec)
    quantize: QuantizeSpec = Field(default_factory=QuantizeSpec)
    optimize: OptimizeSpec = Field(default_factory=OptimizeSpec)
    quality: QualitySpec = Field(default_factory=QualitySpec)
    validated: ValidatedSpec | None = None

    @classmethod
    def of(cls, recipe: RecipeSpec | dict[str, Any]) -> RecipeSpec:
        """``recipe`` itself, or the view of a resolved recipe dict (callers that hold one)."""
        return recipe if isinstance(recipe, RecipeSpec) else cls.model_validate(recipe)
