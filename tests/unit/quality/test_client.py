"""The eval client against a stub server replaying real vLLM 0.32 responses.

``data/vllm_0.32_responses.json`` was recorded from the real vLLM CPU server serving the tiny
model (completion and chat with token ids and top-k logprobs; a teacher-forced
``prompt_logprobs`` request). The real server is exercised in
tests/integration/test_quality.py.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from model_optimizer.quality.client import Generation, Sampling, generate, score_sequences
from model_optimizer.quality.evalset import EvalItem

RECORDED = json.loads((Path(__file__).parent / "data" / "vllm_0.32_responses.json").read_text())


class Stub(BaseHTTPRequestHandler):
    received: list = []
    fail_ids: set = set()

    def log_message(self, *args):  # noqa: D102 - quiet
        pass

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Stub.received.append((self.path, body))
        if str(body.get("prompt")) in Stub.fail_ids:
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": "boom"}')
            return
        if self.path == "/v1/chat/completions":
            answer = RECORDED["chat"]
        elif isinstance(body.get("prompt"), list):
            answer = RECORDED["score"]
        else:
            answer = RECORDED["completion"]
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def stub_url():
    Stub.received, Stub.fail_ids = [], set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_generate_sends_the_recorded_sampling_and_parses_ids_and_logprobs(stub_url):
    items = [EvalItem("a", prompt="count from ten :"),
             EvalItem("c", messages=({"role": "user", "content": "hi"},), max_tokens=3)]
    sampling = Sampling(seed=11, temperature=0.0, top_p=0.9, max_tokens=4, logprobs=3)
    done = []
    completion, chat = generate(stub_url, "tiny", items, sampling, seed=12, on_done=done.append)
    assert sorted(done) == [1, 2]
    (path_a, sent_a), (path_c, sent_c) = sorted(Stub.received, key=lambda r: r[0])[::-1]
    assert path_a == "/v1/completions" and path_c == "/v1/chat/completions"
    for sent in (sent_a, sent_c):
        assert (sent["seed"], sent["temperature"], sent["top_p"]) == (12, 0.0, 0.9)
        assert sent["return_token_ids"] and sent["return_tokens_as_token_ids"]
    assert sent_a["max_tokens"] == 4 and sent_a["logprobs"] == 3
    assert sent_c["max_tokens"] == 3 and sent_c["top_logprobs"] == 3 and sent_c["logprobs"]
    recorded = RECORDED["completion"]["choices"][0]
    assert completion.ok and completion.seed == 12
    assert completion.token_ids == recorded["token_ids"]
    assert completion.prompt_token_ids == recorded["prompt_token_ids"]
    assert len(completion.top_logprobs) == len(recorded["token_ids"])
    assert completion.top_logprobs[0][124] == pytest.approx(-5.293476104736328)
    assert chat.ok and chat.prompt_token_ids == RECORDED["chat"]["prompt_token_ids"]
    assert chat.token_ids == [203, 203, 316] and set(chat.top_logprobs[0]) == {203, 316, 142}


def test_a_failed_request_is_recorded_with_its_error(stub_url):
    Stub.fail_ids = {"bad"}
    good, bad = generate(stub_url, "tiny", [EvalItem("g", prompt="ok"),
                                            EvalItem("b", prompt="bad")], Sampling())
    assert good.ok and not bad.ok and bad.error.startswith("RuntimeError: HTTP 500")


def test_scoring_sends_token_ids_and_keeps_only_answer_positions(stub_url):
    recorded = RECORDED["completion"]["choices"][0]
    seq = Generation("a", 0, "", recorded["prompt_token_ids"], recorded["token_ids"])
    [scored] = score_sequences(stub_url, "tiny", [seq], 3)
    [(_, sent)] = Stub.received
    assert sent["prompt"] == seq.prompt_token_ids + seq.token_ids
    assert sent["prompt_logprobs"] == 3 and sent["max_tokens"] == 1
    assert scored.error is None and len(scored.dists) == len(seq.token_ids)
    last = RECORDED["score"]["choices"][0]["prompt_logprobs"][-1]
    assert scored.dists[-1] == {int(k): v["logprob"] for k, v in last.items()}


def test_a_generation_without_tokens_is_not_scored(stub_url):
    [scored] = score_sequences(stub_url, "tiny", [Generation("x", 0, error="timeout")], 3)
    assert scored.error == "timeout" and not Stub.received
