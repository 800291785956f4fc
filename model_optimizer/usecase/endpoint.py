"""A running OpenAI-compatible server as the target of a use case (`bench --url`,
`capacity --url`): which model to request, and where prompt tokens are counted."""

from __future__ import annotations

from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.httpcall import HTTPCallError, call, join_url
from model_optimizer.load.prompts import register_tokenizer
from model_optimizer.load.server_tokenizer import ServerTokenizer
from model_optimizer.load.workload import api_headers, header_secrets
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import model_location
from model_optimizer.secrets import redact_text, redact_url
from model_optimizer.usecase.notices import INFO, NoticeCallback, tell

MODELS_DEADLINE_S = 5.0  # total, for the /v1/models answer (a listing, no model work)
NAMES_SHOWN, NAME_CHARS = 5, 80  # of a listing in a message: a server may list 30,000


def listed(names: list[str]) -> str:
    """The first ``NAMES_SHOWN`` names (each cut at ``NAME_CHARS``) and how many more."""
    shown = [name if len(name) <= NAME_CHARS else name[:NAME_CHARS] + "..."
             for name in names[:NAMES_SHOWN]]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more:,} more" if more else "")


def served_models(url: str, headers: dict[str, str] | None = None) -> list[str]:
    """Model ids the server lists at /v1/models; UsageError when it does not answer in
    ``MODELS_DEADLINE_S`` (total) with a list."""
    models_url = join_url(url, "/v1/models")
    shown = redact_url(models_url)
    try:
        reply = call("GET", models_url, headers=headers, deadline_s=MODELS_DEADLINE_S)
        if 300 <= reply.status < 400:
            raise UsageError(f"{shown} redirects (HTTP {reply.status}) to "
                             f"{redact_url(reply.headers.get('location', '?'))!r}; mopt does "
                             "not follow redirects: pass the server's own --url")
        if reply.status in (401, 403):
            raise UsageError(f"{redact_url(url)} refused the request (HTTP {reply.status}): "
                             "it needs an API key; pass --api-key-env VAR (the variable "
                             "holding it) or check that variable's value")
        if reply.status != 200:
            raise ValueError(f"HTTP {reply.status}")
        return [str(m["id"]) for m in reply.json().get("data", [])]
    except (HTTPCallError, ValueError, KeyError, TypeError, AttributeError) as exc:
        reason = redact_text(str(exc), header_secrets(headers or {}))
        raise UsageError(f"{redact_url(url)} does not answer /v1/models like an "
                         "OpenAI-compatible server "
                         f"({reason}); check --url and that the server is up") from None


def endpoint_model(url: str, loaded: LoadedRecipe, model: str | None,
                   tokenizer: Path | None, recipe_given: bool,
                   on_notice: NoticeCallback | None = None) -> tuple[str, str]:
    """The model to request at ``url`` (``model``, else the server's only one) and where
    prompt tokens are counted: ``tokenizer``, else the recipe's model, else the server's own
    /tokenize and /detokenize (registered under ``<url>/tokenize``, told to ``on_notice``)."""
    headers = api_headers(loaded.resolved["workload"], url)
    names = served_models(url, headers)
    model_name = model or (names[0] if len(names) == 1 else None)
    if model_name is None:
        raise UsageError(f"{redact_url(url)} serves {len(names):,} models ({listed(names)}); "
                         "choose one with --model")
    if tokenizer is not None:
        return model_name, str(tokenizer)
    if recipe_given:
        return model_name, (loaded.resolved["model"].get("tokenizer")
                            or model_location(loaded.resolved, loaded.base_dir))
    server_tokenizer = ServerTokenizer(url, model_name, headers)
    tell(on_notice, INFO, ["no --tokenizer or recipe: prompt tokens counted by "
                           f"{server_tokenizer.location}"])
    return model_name, register_tokenizer(server_tokenizer.location, server_tokenizer)
