"""Synthetic prompts of an exact length in the served model's own tokens.

A prompt is built from token ids drawn with a seeded RNG from "safe" vocabulary entries
(not special, decoding to visible text that re-encodes to the same single id), decoded to
text, re-encoded, and trimmed or extended until the tokenization has exactly the wanted
length. Texts are what is sent, so the count that matters is the server's:

- ``/v1/completions``: vLLM encodes the prompt with ``add_special_tokens=True``, so a
  tokenizer that adds a BOS token costs one token. ``make()`` prompts are fitted so that
  this count equals ``prompt_tokens``; ``expected_server_prompt_tokens`` is the value vLLM's
  ``usage.prompt_tokens`` should report (``prompt_tokens``, or more when ``prompt_tokens`` is
  smaller than the special tokens plus one text token).
- ``/v1/chat/completions``: vLLM renders the chat template (with the generation prompt) and
  encodes the result without adding special tokens. ``chat_messages()`` fits the one user
  message so the rendered prompt has exactly ``prompt_tokens`` tokens
  (``expected_chat_prompt_tokens``).

Shared prefix: the first ``shared_prefix_tokens`` tokens of every completions prompt (counted
the way the server counts, special tokens included) are identical; for chat the message texts
share a prefix of that many text tokens (minus the special tokens a completions prompt would
carry), so the rendered prompts share the template's head plus that prefix.

Prompt ``i`` depends only on (seed, i) and the tokenizer: ``make(n)`` is deterministic and
``make(10)[:5] == make(5)``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

from model_optimizer.errors import UsageError

MAX_FIT_ATTEMPTS = 200
CANDIDATE_POOL_SIZE = 2000


PREFETCH_CHUNK = 256
_REGISTERED: dict[str, Any] = {}


def register_tokenizer(location: str, tokenizer: Any) -> str:
    """Make ``load_tokenizer(location)`` return ``tokenizer`` (a server's tokenizer, whose
    location is its ``<url>/tokenize``); returns ``location``."""
    _REGISTERED[location] = tokenizer
    return location


def load_tokenizer(tokenizer_dir: str) -> Any:
    """The tokenizer registered under ``tokenizer_dir``, else the folder's Hugging Face one."""
    registered = _REGISTERED.get(tokenizer_dir)
    return registered if registered is not None else _folder_tokenizer(tokenizer_dir)


@functools.lru_cache(maxsize=8)
def _folder_tokenizer(tokenizer_dir: str) -> Any:
    """The model's Hugging Face tokenizer (cached per folder; transformers imported lazily)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


class PromptSource:
    """Deterministic prompts of exactly ``prompt_tokens`` server-side tokens."""

    def __init__(self, tokenizer_dir: str, prompt_tokens: int, shared_prefix_tokens: int = 0,
                 seed: int = 0) -> None:
        if prompt_tokens < 1:
            raise ValueError(f"prompt_tokens must be at least 1, got {prompt_tokens}")
        if not 0 <= shared_prefix_tokens <= prompt_tokens:
            raise ValueError(f"shared_prefix_tokens must be within 0..prompt_tokens "
                             f"({prompt_tokens}), got {shared_prefix_tokens}")
        self.tokenizer_dir = str(tokenizer_dir)
        self.prompt_tokens = prompt_tokens
        self.shared_prefix_tokens = shared_prefix_tokens
        self.seed = seed
        self.tokenizer = load_tokenizer(self.tokenizer_dir)
        self._special_ids = set(self.tokenizer.all_special_ids)
        self._added_specials = self._count_added_specials()
        self._text_tokens = max(1, prompt_tokens - self._added_specials)
        self.expected_server_prompt_tokens = self._text_tokens + self._added_specials
        self._candidates = self._safe_token_ids()
        prefix_text_tokens = min(self._text_tokens,
                                 max(0, shared_prefix_tokens - self._added_specials))
        self._prefix_text = self._fit_text("", prefix_text_tokens, self._count_text,
                                           random.Random(f"mopt-prefix:{seed}"))
        self._chat_prefix_text: str | None = None
        self.expected_chat_prompt_tokens = prompt_tokens

    # ----- public ------------------------------------------------------------------------

    def make(self, n: int) -> list[str]:
        """``n`` completions prompts, each exactly ``expected_server_prompt_tokens`` long."""
        return [self.completion_prompt(index) for index in range(n)]

    def chat_messages(self, n: int) -> list[list[dict[str, str]]]:
        """``n`` one-message chats whose rendered prompt is exactly ``prompt_tokens`` long."""
        return [self.chat_prompt(index) for index in range(n)]

    def completion_prompt(self, index: int, prompt_tokens: int | None = None) -> str:
        """Completions prompt ``index`` (``make(n)[index]``), or one of ``prompt_tokens``.

        A length below the tokenizer's special tokens plus one text token is raised to it.
        """
        target = self.expected_server_prompt_tokens
        if prompt_tokens is not None:
            target = max(prompt_tokens, self._added_specials + 1)
        return self._fit_text(self._prefix_text, target, self._count_completion,
                              self._rng("completion", index))

    def chat_prompt(self, index: int, prompt_tokens: int | None = None) -> list[dict[str, str]]:
        """Chat ``index`` (``chat_messages(n)[index]``), or one rendering to ``prompt_tokens``.

        An explicit length below the template's own tokens plus one is raised to it.
        """
        overhead = self._count_chat("")
        target = self.prompt_tokens if prompt_tokens is None else max(prompt_tokens,
                                                                       overhead + 1)
        if target <= overhead:
            raise ValueError(f"prompt_tokens {target} leaves no room for a message: "
                             f"the chat template alone takes {overhead} tokens")
        if self._chat_prefix_text is None:
            prefix_tokens = min(len(self._encode(self._prefix_text)),
                                self.prompt_tokens - overhead)
            self._chat_prefix_text = self._fit_text("", max(0, prefix_tokens), self._count_text,
                                                    random.Random(f"mopt-chat-prefix:{self.seed}"))
        head = self._chat_prefix_text if prompt_tokens is None else ""
        return [{"role": "user", "content": self._fit_text(
            head, target, self._count_chat, self._rng("chat", index))}]

    def text_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone (no special tokens): how long a reply is."""
        return self._count_text(text)

    def server_prompt_tokens(self, prompt: str) -> int:
        """How many prompt tokens vLLM's /v1/completions counts for ``prompt``."""
        return self._count_completion(prompt)

    def chat_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        """How many prompt tokens vLLM's /v1/chat/completions counts for ``messages``."""
        encode_chat = getattr(self.tokenizer, "encode_chat", None)
        if encode_chat is not None:  # a server's tokenizer renders its own template
            return len(encode_chat(messages))
        return len(self._encode(self._render_chat(messages)))

    # ----- counting ----------------------------------------------------------------------

    def _encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]

    def _count_added_specials(self) -> int:
        sample = "hello world"
        return len(self._encode(sample, True)) - len(self._encode(sample, False))

    def _count_completion(self, text: str) -> int:
        return len(self._encode(text, add_special_tokens=True))

    def _count_text(self, text: str) -> int:
        return len(self._encode(text))

    def _render_chat(self, messages: list[dict[str, str]]) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"the tokenizer in {self.tokenizer_dir} has no chat template")
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)

    def _count_chat(self, content: str) -> int:
        return self.chat_prompt_tokens([{"role": "user", "content": content}])

    # ----- fitting -----------------------------------------------------------------------

    def _rng(self, kind: str, index: int) -> random.Random:
        return random.Random(f"mopt-{kind}:{self.seed}:{index}")

    def _safe_token_ids(self) -> list[int]:
        """Up to CANDIDATE_POOL_SIZE ids that decode to visible text and round-trip alone."""
        vocab_ids = list(range(len(self.tokenizer)))
        random.Random(f"mopt-vocab:{self.seed}").shuffle(vocab_ids)
        prefetch = getattr(self.tokenizer, "prefetch", None)  # a server's: many calls at once
        looks_special = getattr(self.tokenizer, "looks_special", None)
        candidates = []
        for position, token_id in enumerate(vocab_ids):
            if prefetch is not None and position % PREFETCH_CHUNK == 0:
                prefetch(vocab_ids[position:position + PREFETCH_CHUNK])
            if token_id in self._special_ids:
                continue
            text = self.tokenizer.decode([token_id])
            if looks_special is not None and looks_special(token_id, text):
                self._special_ids.add(token_id)
                continue
            if (not text.strip() or not text.isprintable() or "\ufffd" in text
                    or self._encode(text) != [token_id]):
                continue
            candidates.append(token_id)
            if len(candidates) >= CANDIDATE_POOL_SIZE:
                break
        if not candidates:
            raise ValueError(f"no usable token ids in the tokenizer at {self.tokenizer_dir}")
        return sorted(candidates)

    def _sample(self, rng: random.Random, count: int) -> list[int]:
        return [rng.choice(self._candidates) for _ in range(count)]

    def _fit_text(self, head: str, target: int, count: Callable[[str], int],
                  rng: random.Random) -> str:
        """Text starting with ``head`` whose ``count`` is exactly ``target``.

        ``count`` is the server-side length; the head's text tokens must survive unchanged
        (no merge across the boundary), so the shared prefix stays token-identical.
        """
        head_ids = self._encode(head)
        if target <= 0 or (count(head) == target and head):
            return head
        tail = self._sample(rng, max(1, target - count(head)))
        for _ in range(MAX_FIT_ATTEMPTS):
            text = self.tokenizer.decode(head_ids + tail)
            text_ids = self._encode(text)
            if (not text.startswith(head) or text_ids[:len(head_ids)] != head_ids
                    or self._special_ids & set(text_ids)):
                tail = self._sample(rng, len(tail))
                continue
            excess = count(text) - target
            if excess == 0:
                return text
            tail = text_ids[len(head_ids):]
            tail = tail[:len(tail) - excess] if excess > 0 else tail + self._sample(rng, -excess)
            if not tail:
                tail = self._sample(rng, 1)
        raise UsageError(f"could not fit a prompt of {target} tokens after "
                         f"{MAX_FIT_ATTEMPTS} attempts: the tokenizer does not decode what it "
                         "encodes (a server whose /tokenize and /detokenize disagree?). Fix: "
                         "pass a local tokenizer (--tokenizer DIR, model.tokenizer)")
