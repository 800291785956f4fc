"""The mock server's ``/tokenize`` and ``/detokenize`` (vLLM 0.32's shapes), over a word vocabulary.

The mock counts a prompt's tokens as its whitespace-separated words (``mock_answer``), so its
tokenizer is word-level: ids 0-2 are the special ``<s>``, ``</s>``, ``<unk>``; id ``i`` from 3
up to ``vocab_size`` is the word ``w<i>``; any other word encodes to ``<unk>``. Decoding joins
the words with spaces. With ``bos_token`` the mock adds ``<s>`` to a completions prompt (and
counts it in ``usage``), as a Llama tokenizer does; chat messages are counted without a
template (their words). An id outside the vocabulary is refused with HTTP 400.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from model_optimizer.load.mock_answer import error_body

SPECIALS = ("<s>", "</s>", "<unk>")
UNK = 2


def encode_words(text: str, vocab_size: int) -> list[int]:
    """The mock vocabulary's ids of ``text`` (one per whitespace-separated word)."""
    ids = []
    for word in text.split():
        if word in SPECIALS:
            ids.append(SPECIALS.index(word))
        elif word.startswith("w") and word[1:].isdigit() and 3 <= int(word[1:]) < vocab_size:
            ids.append(int(word[1:]))
        else:
            ids.append(UNK)
    return ids


def decode_words(ids: list[int]) -> str:
    """The text of ``ids`` (every id must be in the vocabulary)."""
    return " ".join(SPECIALS[i] if i < len(SPECIALS) else f"w{i}" for i in ids)


async def _body(request: web.Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def tokenize(request: web.Request, config: Any) -> web.Response:
    """``POST /tokenize``: ``{"prompt", "add_special_tokens"}`` or ``{"messages"}``."""
    body = await _body(request)
    if body is None or ("prompt" not in body and "messages" not in body):
        return web.json_response(error_body("expected prompt or messages", 400), status=400)
    if body.get("model") not in (None, config.model):
        return web.json_response(error_body(f"The model `{body['model']}` does not exist.",
                                            404), status=404)
    if "messages" in body:
        texts = [message.get("content") for message in body["messages"] or []
                 if isinstance(message, dict)]
        tokens = encode_words(" ".join(t for t in texts if isinstance(t, str)),
                              config.vocab_size)
    else:
        tokens = encode_words(str(body["prompt"]), config.vocab_size)
        if config.bos_token and body.get("add_special_tokens", True):
            tokens = [0, *tokens]
    return web.json_response({"count": len(tokens), "max_model_len": 1 << 20,
                              "tokens": tokens, "token_strs": None})


async def detokenize(request: web.Request, config: Any) -> web.Response:
    """``POST /detokenize``: ``{"tokens": [ids]}`` -> ``{"prompt": text}``."""
    body = await _body(request)
    tokens = body.get("tokens") if body else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        return web.json_response(error_body("expected tokens: a list of ids", 400), status=400)
    if any(not 0 <= token < config.vocab_size for token in tokens):
        return web.json_response(error_body("token id out of vocabulary", 400), status=400)
    return web.json_response({"prompt": decode_words(tokens)})
