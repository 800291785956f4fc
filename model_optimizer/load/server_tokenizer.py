"""The served model's tokenizer, read through the server's own ``/tokenize`` and ``/detokenize``.

``mopt bench --url`` with neither ``--tokenizer`` nor ``--recipe`` counts tokens the way the
server does by asking it: vLLM's OpenAI server (0.32) answers

- ``POST /tokenize`` ``{"model", "prompt", "add_special_tokens"}`` (completions: the prompt as
  ``/v1/completions`` encodes it with ``add_special_tokens: true``) or ``{"model",
  "messages", "add_generation_prompt": true}`` (the chat template applied, as
  ``/v1/chat/completions`` does) with ``{"count", "max_model_len", "tokens": [ids]}``;
- ``POST /detokenize`` ``{"model", "tokens": [ids]}`` with ``{"prompt": text}``.

``ServerTokenizer`` offers the part of a Hugging Face tokenizer that ``PromptSource`` uses
(call, ``decode``, ``len``, ``all_special_ids``) plus ``encode_chat`` (the server renders the
template) and ``prefetch`` (many ids decoded and re-encoded concurrently). Answers are cached
(bounded), every call has a total deadline and a bounded read (``model_optimizer.httpcall``),
and the API key header goes with every call (vLLM does not guard these paths; a stricter
server may). Error messages never repeat the key (a server may echo it). All calls together
are bounded too: at most ``MAX_CALLS`` calls and ``BUDGET_S`` seconds spent waiting on the
server, then a ``TokenizeBudgetSpent`` error naming ``--tokenizer`` (a slow or inconsistent endpoint
cannot keep a bench preparing prompts; a healthy one answers in milliseconds).

What the endpoints cannot say is guessed, and only steers which ids random prompts are drawn
from (the lengths stay the server's own): the vocabulary size is found by a search over
``/detokenize`` (the first id that no longer decodes); special tokens are those the server
adds to a prompt (BOS) and those whose text looks like markup (``<s>``, ``<|eot_id|>``,
``[INST]``), which random prompts avoid.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from model_optimizer import httpcall
from model_optimizer.errors import UsageError
from model_optimizer.load.workload import header_secrets
from model_optimizer.secrets import redact_text, redact_url

TIMEOUT_S = 30.0  # total, per call: prompts are built before the load, but a 2-core CI runner
# with three tests beside left one call unanswered past 5 s (2026-12-05)
BUDGET_S = 120.0  # seconds of waiting on the server, all calls together
MAX_CALLS = 50_000  # calls in all (a 5-request bench makes about 1,000; a prompt about 5)
MAX_ANSWER_BYTES = 16 << 20
WORKERS = 8
CACHE_SIZE = 8192
MAX_VOCAB = 1 << 22
_MARKUP = re.compile(r"^(<[^<>\s]+>|<\|[^|]*\|>|\[/?[A-Z_]+\])$")
_NO_ENDPOINT = (404, 405, 501)


class ServerTokenizer:
    """Tokens counted by the server at ``base_url`` for ``model``."""

    def __init__(self, base_url: str, model: str | None = None,
                 headers: Mapping[str, str] | None = None, *,
                 timeout_s: float = TIMEOUT_S) -> None:
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self._headers = dict(headers or {})
        self._known = header_secrets(self._headers)
        self._encode_cached = functools.lru_cache(maxsize=CACHE_SIZE)(self._encode_remote)
        self._decode_cached = functools.lru_cache(maxsize=CACHE_SIZE)(self._decode_remote)
        self._vocab_size: int | None = None
        self._budget_lock = threading.Lock()
        self.calls, self.waited_s = 0, 0.0
        self.chat_template = "rendered by the server"  # PromptSource checks it exists
        sample = tuple(self._encode_cached("hello world", False))  # fails early: no endpoint
        with_specials = self._encode_cached("hello world", True)
        self._specials = {token for token in with_specials if token not in sample}

    @property
    def location(self) -> str:
        """Where the tokens come from, as a tokenizer location (``<url>/tokenize``)."""
        return redact_url(httpcall.join_url(self.base_url, "/tokenize"))

    # ----- the Hugging Face tokenizer subset PromptSource uses --------------------------

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": list(self._encode_cached(text, bool(add_special_tokens)))}

    def decode(self, token_ids: Iterable[int]) -> str:
        """The text of ``token_ids`` as the server decodes it."""
        return self._decode_cached(tuple(int(token) for token in token_ids))

    def __len__(self) -> int:
        if self._vocab_size is None:
            self._vocab_size = self._find_vocab_size()
        return self._vocab_size

    @property
    def all_special_ids(self) -> list[int]:
        """Ids the server adds itself, and ids seen so far whose text looks like markup."""
        return sorted(self._specials)

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]:
        """The ids of ``messages`` rendered with the server's chat template."""
        body = {"messages": messages, "add_generation_prompt": True}
        return list(self._post("/tokenize", body, "chat messages")["tokens"])

    def looks_special(self, token_id: int, text: str) -> bool:
        """True (and remembered) when ``text`` reads like a special token's markup."""
        if token_id in self._specials or _MARKUP.match(text.strip()):
            self._specials.add(token_id)
            return True
        return False

    def prefetch(self, token_ids: Iterable[int]) -> None:
        """Decode each id and re-encode its text, ``WORKERS`` calls at a time (cached)."""
        def one(token_id: int) -> None:
            self(self.decode([token_id]))

        with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="mopt-tok") as pool:
            list(pool.map(one, token_ids))

    # ----- HTTP ------------------------------------------------------------------------

    def _encode_remote(self, text: str, add_special_tokens: bool) -> tuple[int, ...]:
        body = {"prompt": text, "add_special_tokens": add_special_tokens}
        return tuple(self._post("/tokenize", body, "a prompt")["tokens"])

    def _decode_remote(self, token_ids: tuple[int, ...]) -> str:
        return str(self._post("/detokenize", {"tokens": list(token_ids)}, "token ids")["prompt"])

    def _post(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        if self.model:
            body = {"model": self.model, **body}
        url = httpcall.join_url(self.base_url, path)
        shown = redact_url(url)
        deadline_s = self._spend(shown)
        started = time.monotonic()
        try:
            reply = httpcall.call("POST", url, json_body=body, headers=self._headers,
                                  deadline_s=deadline_s, max_bytes=MAX_ANSWER_BYTES)
        except httpcall.HTTPCallError as exc:
            self._waited(started)
            if deadline_s < self.timeout_s:  # cut short by what was left of the budget
                raise self._spent(shown) from None
            raise UsageError(f"{shown} did not answer ({exc}); check --url, or pass "
                             "--tokenizer DIR to count tokens locally") from None
        self._waited(started)
        if reply.status in _NO_ENDPOINT and not _error_message(reply):
            raise UsageError(f"{shown} is not there (HTTP {reply.status}): this server "
                             "has no tokenize endpoint, so mopt cannot count tokens the way it "
                             "does; pass --tokenizer DIR (the model's folder or its tokenizer "
                             "files) or --recipe FILE whose model is on this machine")
        if reply.status in (401, 403):
            raise UsageError(f"{shown} refused the request (HTTP {reply.status}): pass "
                             "--api-key-env VAR, or --tokenizer DIR to count tokens locally")
        try:
            answer = reply.json() if reply.status == 200 else None
            if not isinstance(answer, dict):
                raise ValueError("not a JSON object")
            return answer
        except ValueError as exc:
            excerpt = redact_text(reply.text[:300], self._known)
            raise TokenizeError(f"{shown} could not tokenize {what}: HTTP "
                                f"{reply.status} {excerpt!r} ({exc})") from None

    def _spend(self, shown: str) -> float:
        """Count one call against the budget; its deadline (what is left, at most
        ``timeout_s``), or TokenizeBudgetSpent once the budget is spent."""
        with self._budget_lock:
            self.calls += 1
            calls, left = self.calls, BUDGET_S - self.waited_s
        if calls > MAX_CALLS or left <= 0:
            raise self._spent(shown)
        return min(self.timeout_s, left)

    def _waited(self, started: float) -> None:
        with self._budget_lock:
            self.waited_s += time.monotonic() - started

    def _spent(self, shown: str) -> TokenizeBudgetSpent:
        return TokenizeBudgetSpent(
            f"counting tokens through {shown} took {min(self.calls, MAX_CALLS)} calls and "
            f"{self.waited_s:.1f} s of waiting, over the bound ({MAX_CALLS} calls, "
            f"{BUDGET_S:g} s): the server's tokenizer is too slow or answers inconsistently; "
            "pass --tokenizer DIR to count tokens locally")

    def _decodes(self, token_id: int) -> bool:
        try:
            return bool(self.decode([token_id]))
        except TokenizeError:
            return False

    def _find_vocab_size(self) -> int:
        """The first id that does not decode: doubling, then bisection (about 2 log2 V calls)."""
        low, high = 0, 256  # _decodes(low) holds (id 0 is in every vocabulary)
        while high < MAX_VOCAB and self._decodes(high):
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if self._decodes(middle) else (low, middle)
        return high


def _error_message(reply: httpcall.Reply) -> str | None:
    """The OpenAI-style ``error.message`` of an answer (a 404 for an unknown model has one;
    a path the server does not have has none)."""
    try:
        error = reply.json().get("error")
    except (ValueError, AttributeError):
        return None
    return error.get("message") if isinstance(error, dict) else None


class TokenizeError(UsageError):
    """The server's tokenize endpoint answered, but not with tokens."""


class TokenizeBudgetSpent(UsageError):
    """The calls to the server's tokenizer, all together, ran over their bound."""
