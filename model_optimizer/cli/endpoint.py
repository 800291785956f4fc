"""A running OpenAI-compatible server as the target of a command (`bench --url`,
`capacity --url`): which model to request, and where prompt tokens are counted."""

from __future__ import annotations

from pathlib import Path

import requests

from model_optimizer.cli.common import err_console
from model_optimizer.errors import UsageError
from model_optimizer.load.prompts import register_tokenizer
from model_optimizer.load.server_tokenizer import ServerTokenizer
from model_optimizer.load.workload import api_headers
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import model_location


def served_models(url: str, headers: dict[str, str] | None = None) -> list[str]:
    """Model ids the server lists at /v1/models; UsageError when it does not answer."""
    try:
        session = requests.Session()
        session.trust_env = False  # never route a benchmark through a proxy from the env
        response = session.get(f"{url}/v1/models", timeout=10, allow_redirects=False,
                               headers=headers or {})
        if response.is_redirect:
            raise UsageError(f"{url}/v1/models redirects (HTTP {response.status_code}) to "
                             f"{response.headers.get('Location')!r}; mopt does not follow "
                             "redirects: pass the server's own --url")
        if response.status_code in (401, 403):
            raise UsageError(f"{url} refused the request (HTTP {response.status_code}): it "
                             "needs an API key; pass --api-key-env VAR (the variable holding "
                             "it) or check that variable's value")
        response.raise_for_status()
        return [m["id"] for m in response.json().get("data", [])]
    except (requests.RequestException, ValueError, KeyError) as exc:
        raise UsageError(f"{url} does not answer /v1/models like an OpenAI-compatible server "
                         f"({exc}); check --url and that the server is up") from None


def endpoint_model(url: str, loaded: LoadedRecipe, model: str | None,
                   tokenizer: Path | None, recipe_given: bool) -> tuple[str, str]:
    """The model to request at ``url`` (``model``, else the server's only one) and where
    prompt tokens are counted: ``tokenizer``, else the recipe's model, else the server's own
    /tokenize and /detokenize (registered under ``<url>/tokenize``)."""
    headers = api_headers(loaded.resolved["workload"])
    names = served_models(url, headers)
    model_name = model or (names[0] if len(names) == 1 else None)
    if model_name is None:
        raise UsageError(f"{url} serves {len(names)} models ({', '.join(names)}); "
                         "choose one with --model")
    if tokenizer is not None:
        return model_name, str(tokenizer)
    if recipe_given:
        return model_name, (loaded.resolved["model"].get("tokenizer")
                            or model_location(loaded.resolved, loaded.base_dir))
    err_console.print(f"no --tokenizer or recipe: prompt tokens counted by {url}/tokenize",
                      highlight=False)
    return model_name, register_tokenizer(url + "/tokenize",
                                          ServerTokenizer(url, model_name, headers))
