"""The mock server's prefix cache: what vLLM's automatic prefix caching would find cached.

A prompt is the mock's tokens (whitespace-separated words, as it counts prompt tokens; a
chat's messages one after the other) cut into blocks of ``BLOCK`` tokens. As in vLLM, a block
hits when it and every block before it were seen in an earlier prompt (a hash chain), only
full blocks count, and the prompt's last token is always computed. Counted in tokens, like vLLM's
``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``; the seen blocks are bounded
(``MAX_BLOCKS``, then forgotten all at once, like an evicting cache under pressure).
"""

from __future__ import annotations

from typing import Any

BLOCK = 16
MAX_BLOCKS = 1 << 16


def prompt_words(body: dict[str, Any]) -> list[str]:
    """The mock's tokens of a request body, in order (``count_prompt_tokens``'s words)."""
    if "messages" in body:
        words: list[str] = []
        for message in body.get("messages") or []:
            content = message.get("content") or ""
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            words += str(content).split()
        return words
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        return [str(item) for item in prompt]
    return str(prompt).split()


class PrefixCache:
    """Block hash chains of the prompts seen; ``queries`` and ``hits`` in tokens."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.queries = 0
        self.hits = 0
        self._seen: set[int] = set()

    def lookup(self, words: list[str]) -> int:
        """Tokens of ``words`` found cached (0 with caching off); the prompt is then cached."""
        if not self.enabled:
            return 0
        self.queries += len(words)
        chain, hit, missed = 0, 0, False
        for start in range(0, len(words) - 1 - (len(words) - 1) % BLOCK, BLOCK):
            chain = hash((chain, tuple(words[start:start + BLOCK])))
            if not missed and chain in self._seen:
                hit += BLOCK
                continue
            missed = True
            if len(self._seen) >= MAX_BLOCKS:
                self._seen.clear()
            self._seen.add(chain)
        self.hits += hit
        return hit
