"""The router's side of a fleet, as pure functions: LiteLLM's configuration generated from
the routing rules, what a client sends for each class, and where each request must land.

Why LiteLLM's proxy, and what it does with each rule: docs/design.md section 2 ("The
router"). The configuration (``router.yaml`` in the archive) maps:

- a ``model:`` rule to a model group of that name holding the instance;
- ``tag:`` rules to deployments of the router's model name carrying the tags
  (``enable_tag_filtering``), the fallback also carrying ``default`` (untagged requests);
- ``max_prompt_tokens:`` rules to deployments of the router's model name with that
  ``max_input_tokens`` and an ``order`` (shortest first), the fallback last with no limit:
  with ``enable_pre_call_checks`` a prompt too long for one goes on to the next;
- retries and cooldowns off, so a request goes where the rules say or fails visibly.

A *balanced* router (``RouterSpec.balance``: the replicas ``mopt split --replicas`` derives)
has no class rule: every instance is a deployment of the router's model name, one model
group, and LiteLLM's ``routing_strategy`` picks among them per request.

The master key is named, never written: ``os.environ/LITELLM_MASTER_KEY``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from model_optimizer.fleet.spec import (
    ANY_INSTANCE,
    BY_LENGTH,
    BY_MODEL,
    BY_TAG,
    Route,
    RouterSpec,
)

MASTER_KEY_ENV = "LITELLM_MASTER_KEY"
DEFAULT_TAG = "default"  # LiteLLM's tag for deployments that take untagged requests
PROVIDER = "hosted_vllm"


@dataclass(frozen=True)
class Endpoint:
    """Where an instance answers: its base URL and the model name it serves."""

    base_url: str
    served_name: str


def route_of(router: RouterSpec, request_class: str | None) -> Route | None:
    """The first rule naming ``request_class`` (None: no rule)."""
    return next((r for r in router.routes if r.request_class == request_class), None)


def request_label(router: RouterSpec, request_class: str | None) -> tuple[str, tuple[str, ...]]:
    """What a client sends for a request of ``request_class``: (model name, tags)."""
    route = route_of(router, request_class)
    if route is not None and route.by == BY_MODEL:
        return route.model, ()
    if route is not None and route.by == BY_TAG:
        return router.model, (route.tag,)
    return router.model, ()


def expected_instance(router: RouterSpec, request_class: str | None,
                      prompt_tokens: int | None) -> str | None:
    """The instance the rules send a request to (None: refused, or its length unknown when
    length rules decide; :data:`ANY_INSTANCE`: a balanced group, any of its instances)."""
    if router.balance is not None:
        return ANY_INSTANCE
    route = route_of(router, request_class)
    if route is not None and route.by in (BY_MODEL, BY_TAG):
        return route.to
    lengths = router.length_routes()
    if lengths and prompt_tokens is None:
        return None
    for rule in lengths:
        if prompt_tokens <= rule.max_prompt_tokens:
            return rule.to
    return router.fallback


def _deployment(group: str, instance: str, endpoint: Endpoint, ident: str,
                **params: object) -> dict:
    info = {"id": ident}
    if "max_input_tokens" in params:
        info["max_input_tokens"] = params.pop("max_input_tokens")
    litellm_params = {"model": f"{PROVIDER}/{endpoint.served_name}",
                      "api_base": f"{endpoint.base_url}/v1", "api_key": "none", **params}
    return {"model_name": group, "litellm_params": litellm_params,
            "model_info": {**info, "mopt_instance": instance}}


def _public_group(router: RouterSpec, endpoints: Mapping[str, Endpoint]) -> list[dict]:
    """Deployments of the router's own model name: tag rules, length rules, the fallback."""
    out: list[dict] = []
    tags: dict[str, list[str]] = {}
    for route in router.routes:
        if route.by == BY_TAG:
            tags.setdefault(route.to, [])
            if route.tag not in tags[route.to]:
                tags[route.to].append(route.tag)
    if tags:
        if router.fallback is not None:
            tags.setdefault(router.fallback, []).append(DEFAULT_TAG)
        return [_deployment(router.model, name, endpoints[name], f"{name}-tags", tags=labels)
                for name, labels in tags.items()]
    for order, rule in enumerate(router.length_routes(), start=1):
        out.append(_deployment(router.model, rule.to, endpoints[rule.to],
                               f"{rule.to}-upto-{rule.max_prompt_tokens}", order=order,
                               max_input_tokens=rule.max_prompt_tokens))
    if router.fallback is not None:
        extra = {"order": len(out) + 1} if out else {}
        out.append(_deployment(router.model, router.fallback, endpoints[router.fallback],
                               f"{router.fallback}-fallback", **extra))
    return out


def router_config(router: RouterSpec, endpoints: Mapping[str, Endpoint],
                  request_timeout_s: float) -> dict:
    """LiteLLM's proxy configuration for ``router`` over the instances at ``endpoints``."""
    if router.balance is not None:
        return _settings([_deployment(router.model, name, endpoint, f"{name}-replica")
                          for name, endpoint in endpoints.items()],
                         {"routing_strategy": router.balance}, request_timeout_s)
    model_list: list[dict] = []
    seen: set[tuple[str, str]] = set()
    for route in router.routes:
        if route.by == BY_MODEL and (route.model, route.to) not in seen:
            seen.add((route.model, route.to))
            model_list.append(_deployment(route.model, route.to, endpoints[route.to],
                                          f"{route.to}-as-{route.model}"))
    model_list += _public_group(router, endpoints)
    kinds = {route.by for route in router.routes}
    settings: dict[str, object] = {}
    if BY_TAG in kinds:
        settings["enable_tag_filtering"] = True
    if BY_LENGTH in kinds:
        settings["enable_pre_call_checks"] = True
    return _settings(model_list, settings, request_timeout_s)


def _settings(model_list: list[dict], settings: dict[str, object],
              request_timeout_s: float) -> dict:
    """The whole configuration: no retries or cooldowns, the key named, never written."""
    settings = {"routing_strategy": "simple-shuffle", **settings, "num_retries": 0,
                "disable_cooldowns": True}
    return {"model_list": model_list, "router_settings": settings,
            "litellm_settings": {"num_retries": 0, "request_timeout": float(request_timeout_s),
                                 "drop_params": False},
            "general_settings": {"master_key": f"os.environ/{MASTER_KEY_ENV}"}}
