"""The generation client of an eval: fixed sampling, token ids, top-k logprobs.

Two kinds of request go to an OpenAI-compatible server (vLLM's extensions are used and
named):

- **generate** (:func:`generate`): each eval item once per repeat with the recorded
  :class:`Sampling` (seed, temperature, top_p, max_tokens) and ``logprobs`` = k, asking for
  the prompt's and the answer's token ids (vLLM's ``return_token_ids``) and token ids instead
  of token strings in the logprobs (``return_tokens_as_token_ids``), so two tokens with the
  same text are never confused.
- **score** (:func:`score_sequences`): teacher forcing. A token sequence (prompt + a given
  answer) is sent as a token-id prompt with ``max_tokens`` 1 and vLLM's ``prompt_logprobs``
  = k; the server returns its next-token distribution (top k, plus the actual token) at
  every position of the given answer. Scoring the *baseline's* answers on both deployments
  compares their distributions on identical contexts at every position, which free-running
  generations cannot do after their first different token.

Requests run ``concurrency`` at a time (default 1: a batch's composition can change floating
point results, so a deterministic comparison sends one request at a time). Each request has a
timeout; a failed request is recorded with its error, never retried silently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import requests

from model_optimizer.quality.evalset import EvalItem

ERROR_CHARS = 300
TokenDist = dict[int, float]  # token id -> logprob


@dataclass(frozen=True)
class Sampling:
    """The sampling parameters of an eval, recorded with every output."""

    seed: int = 0
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 16
    logprobs: int = 5

    def to_dict(self) -> dict:
        """JSON form."""
        return asdict(self)


@dataclass
class Generation:
    """One generated answer with its tokens and their top-k logprobs."""

    id: str
    seed: int
    text: str = ""
    prompt_token_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    top_logprobs: list[TokenDist] = field(default_factory=list)
    finish_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the request succeeded."""
        return self.error is None

    def to_dict(self) -> dict:
        """JSON form (one line of ``outputs.jsonl``); logprob keys are token ids."""
        data = asdict(self)
        data["top_logprobs"] = [{str(k): v for k, v in d.items()} for d in self.top_logprobs]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Generation:
        """Inverse of :meth:`to_dict`."""
        return cls(data["id"], data["seed"], data.get("text", ""),
                   list(data.get("prompt_token_ids") or []), list(data.get("token_ids") or []),
                   [{int(k): float(v) for k, v in d.items()}
                    for d in data.get("top_logprobs") or []],
                   data.get("finish_reason"), data.get("error"))


def _token_id(key: str) -> int:
    """``token_id:123`` (vLLM's return_tokens_as_token_ids) -> 123."""
    return int(key.rsplit(":", 1)[1])


def _completion_payload(model: str, item: EvalItem, sampling: Sampling, seed: int) -> dict:
    payload = {"model": model, "max_tokens": item.max_tokens or sampling.max_tokens,
               "temperature": sampling.temperature, "top_p": sampling.top_p, "seed": seed,
               "return_token_ids": True}
    if sampling.logprobs:
        payload["return_tokens_as_token_ids"] = True
    if item.messages is not None:
        payload["messages"] = list(item.messages)
        if sampling.logprobs:
            payload.update(logprobs=True, top_logprobs=sampling.logprobs)
    else:
        payload["prompt"] = item.prompt
        if sampling.logprobs:
            payload["logprobs"] = sampling.logprobs
    return payload


def _parse_completion(body: dict, generation: Generation) -> None:
    choice = body["choices"][0]
    generation.text = choice.get("text") or ""
    generation.finish_reason = choice.get("finish_reason")
    generation.prompt_token_ids = list(choice.get("prompt_token_ids") or [])
    generation.token_ids = list(choice.get("token_ids") or [])
    logprobs = choice.get("logprobs") or {}
    generation.top_logprobs = [{_token_id(k): float(v) for k, v in (d or {}).items()}
                               for d in logprobs.get("top_logprobs") or []]


def _parse_chat(body: dict, generation: Generation) -> None:
    choice = body["choices"][0]
    generation.text = (choice.get("message") or {}).get("content") or ""
    generation.finish_reason = choice.get("finish_reason")
    generation.prompt_token_ids = list(body.get("prompt_token_ids")
                                       or choice.get("prompt_token_ids") or [])
    generation.token_ids = list(choice.get("token_ids") or [])
    content = (choice.get("logprobs") or {}).get("content") or []
    generation.top_logprobs = [{_token_id(t["token"]): float(t["logprob"])
                                for t in entry.get("top_logprobs") or []} for entry in content]


class _Poster:
    """One requests.Session per thread, bounded timeouts, errors as text."""

    def __init__(self, base_url: str, timeout_s: float):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._local = threading.local()

    def post(self, path: str, payload: dict) -> dict:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        response = session.post(f"{self.base_url}{path}", json=payload, timeout=self.timeout_s)
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:ERROR_CHARS]}")
        return response.json()


def _run_all(jobs: Sequence, work: Callable, concurrency: int,
             on_done: Callable[[int], None] | None) -> list:
    results: list = [None] * len(jobs)
    done = 0
    lock = threading.Lock()

    def run(index: int) -> None:
        nonlocal done
        results[index] = work(jobs[index])
        with lock:
            done += 1
            if on_done is not None:
                on_done(done)

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for future in [pool.submit(run, i) for i in range(len(jobs))]:
            future.result()
    return results


def generate(base_url: str, model: str, items: Sequence[EvalItem], sampling: Sampling, *,
             seed: int | None = None, concurrency: int = 1, timeout_s: float = 120.0,
             on_done: Callable[[int], None] | None = None) -> list[Generation]:
    """Generate an answer for every item (in item order) with ``sampling``.

    ``seed`` overrides ``sampling.seed`` (repeats use seed, seed + 1, ...).
    """
    poster = _Poster(base_url, timeout_s)
    request_seed = sampling.seed if seed is None else seed

    def one(item: EvalItem) -> Generation:
        generation = Generation(item.id, request_seed)
        chat = item.messages is not None
        try:
            body = poster.post("/v1/chat/completions" if chat else "/v1/completions",
                               _completion_payload(model, item, sampling, request_seed))
            (_parse_chat if chat else _parse_completion)(body, generation)
        except (requests.RequestException, RuntimeError, ValueError, KeyError,
                IndexError, TypeError) as exc:
            generation.error = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
        return generation

    return _run_all(items, one, concurrency, on_done)


@dataclass
class Scored:
    """Next-token distributions of one deployment along a given answer (teacher forcing)."""

    id: str
    dists: list[TokenDist] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict:
        """JSON form (one line of ``scores.jsonl``)."""
        return {"id": self.id, "error": self.error,
                "dists": [{str(k): v for k, v in d.items()} for d in self.dists]}

    @classmethod
    def from_dict(cls, data: dict) -> Scored:
        """Inverse of :meth:`to_dict`."""
        return cls(data["id"], [{int(k): float(v) for k, v in d.items()}
                                for d in data.get("dists") or []], data.get("error"))


def _prompt_dists(body: dict, start: int) -> list[TokenDist]:
    entries = body["choices"][0].get("prompt_logprobs") or []
    return [{int(k): float(v["logprob"] if isinstance(v, dict) else v)
             for k, v in (entry or {}).items()} for entry in entries[start:]]


def score_sequences(base_url: str, model: str, sequences: Sequence[Generation], k: int, *,
                    concurrency: int = 1, timeout_s: float = 120.0,
                    on_done: Callable[[int], None] | None = None) -> list[Scored]:
    """The server's top-``k`` next-token logprobs at every answer position of ``sequences``
    (each the prompt token ids and answer token ids of a generation), via ``prompt_logprobs``.
    """
    poster = _Poster(base_url, timeout_s)

    def one(seq: Generation) -> Scored:
        scored = Scored(seq.id)
        if not seq.ok or not seq.prompt_token_ids or not seq.token_ids:
            scored.error = seq.error or "no token ids to score"
            return scored
        payload = {"model": model, "prompt": seq.prompt_token_ids + seq.token_ids,
                   "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": k}
        try:
            body = poster.post("/v1/completions", payload)
            scored.dists = _prompt_dists(body, len(seq.prompt_token_ids))
        except (requests.RequestException, RuntimeError, ValueError, KeyError,
                IndexError, TypeError) as exc:
            scored.error = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
        return scored

    return _run_all(sequences, one, concurrency, on_done)
