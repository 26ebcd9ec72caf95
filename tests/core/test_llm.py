"""Model calls through the real litellm path: mock_response, and a fake OpenAI server on 127.0.0.1."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_openai_server import FakeOpenAI  # noqa: E402

from core.llm import (  # noqa: E402
    LiteLLMClient,
    ModelConfig,
    ModelError,
    ScriptedModel,
    make_client,
    resolve_model,
)

GOOD = "Plan.\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n```\n"
MSG = [{"role": "user", "content": "write a kernel"}]


@pytest.fixture
def server():
    with FakeOpenAI(default=("reply", GOOD)) as srv:
        yield srv


def client(srv, **kw):
    cfg = dict(model="openai/test-model", api_base=srv.api_base, timeout_s=1.0, retries=2, backoff_s=0.01)
    cfg.update(kw)
    return LiteLLMClient(ModelConfig(**cfg))


def test_streams_tokens_and_counts_usage(server):
    tokens = []
    c = client(server).complete(MSG, on_token=tokens.append)
    assert c.text == GOOD and "".join(tokens) == GOOD and len(tokens) > 3
    assert c.prompt_tokens == 11 and c.completion_tokens == len(tokens) and not c.tokens_estimated
    assert c.cost is None  # a custom endpoint has no known price: unknown, not zero
    assert server.requests[0]["stream"] is True and server.requests[0]["messages"] == MSG


def test_retries_429_then_succeeds(server):
    server.push(("status", 429))
    c = client(server).complete(MSG)
    assert c.text == GOOD and len(server.requests) == 2


def test_500_after_retries_is_one_clear_line(server):
    server.push(*[("status", 500)] * 3)
    with pytest.raises(ModelError) as err:
        client(server, retries=2).complete(MSG)
    assert err.value.reason == "server_error" and "after 3 attempts" in str(err.value)
    assert "\n" not in str(err.value) and len(server.requests) == 3


def test_rate_limit_after_retries(server):
    server.push(*[("status", 429)] * 2)
    with pytest.raises(ModelError, match="rate limited after 2 attempts") as err:
        client(server, retries=1).complete(MSG)
    assert err.value.reason == "rate_limit"


@pytest.mark.alone
def test_hang_past_timeout(server):
    """A server that never answers ends in one line after the timeout, not after the hang. litellm is
    imported before the clock starts: its first import takes 4-6 s on a 2-core machine and, inside the
    bound, failed the test 2 times of 3 (the timeout itself: 1.0-1.4 s)."""
    import litellm  # noqa: F401 - imported here so the bound below times the call, not the import

    server.push(("hang", 10))
    start = time.monotonic()
    with pytest.raises(ModelError, match="no reply within 1 s") as err:
        client(server, retries=0).complete(MSG)
    assert err.value.reason == "timeout" and time.monotonic() - start < 5


def test_no_code_reply_is_returned_as_text(server):
    server.push(("reply", "I would rather not."))
    assert client(server).complete(MSG).text == "I would rather not."


def test_unreachable_server():
    c = LiteLLMClient(ModelConfig("openai/test-model", api_base="http://127.0.0.1:9/v1", timeout_s=1, retries=1,
                                  backoff_s=0.01))
    with pytest.raises(ModelError, match="cannot reach http://127.0.0.1:9/v1") as err:
        c.complete(MSG)
    assert err.value.reason == "connection"


def test_mock_response_prices_known_models(monkeypatch):
    c = LiteLLMClient(ModelConfig("gpt-4o-mini"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    import litellm

    real = litellm.completion
    monkeypatch.setattr(litellm, "completion", lambda **kw: real(mock_response=GOOD, **kw))
    out = c.complete(MSG)
    assert out.text == GOOD and out.prompt_tokens > 0 and out.completion_tokens > 0
    info = litellm.get_model_info("gpt-4o-mini")
    expected = out.prompt_tokens * info["input_cost_per_token"] + out.completion_tokens * info["output_cost_per_token"]
    assert out.cost == pytest.approx(expected) and out.cost > 0


def test_missing_api_key_says_which_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("EVOKERNEL_API_KEY", raising=False)
    with pytest.raises(ModelError, match="set OPENAI_API_KEY") as err:
        LiteLLMClient(ModelConfig("gpt-4o-mini")).complete(MSG)
    assert err.value.reason == "auth"


def test_resolve_model_precedence(tmp_path, monkeypatch):
    cfg = tmp_path / "config.toml"
    monkeypatch.setenv("EVOKERNEL_CONFIG", str(cfg))
    monkeypatch.delenv("EVOKERNEL_MODEL", raising=False)
    monkeypatch.delenv("EVOKERNEL_API_BASE", raising=False)
    assert resolve_model(None) is None
    cfg.write_text('model = "ollama/qwen"\napi_base = "http://localhost:11434"\ntimeout_s = 30\n')
    m = resolve_model(None)
    assert (m.model, m.api_base, m.timeout_s) == ("ollama/qwen", "http://localhost:11434", 30)
    monkeypatch.setenv("EVOKERNEL_MODEL", "openai/env-model")
    assert resolve_model(None).model == "openai/env-model"
    assert resolve_model("anthropic/flag", "http://x/v1").model == "anthropic/flag"
    assert resolve_model("anthropic/flag", "http://x/v1").api_base == "http://x/v1"
    cfg.write_text("model = [broken")
    monkeypatch.delenv("EVOKERNEL_MODEL")
    assert resolve_model(None) is None


def test_scripted_model_streams_and_runs_out(tmp_path):
    path = tmp_path / "replies.json"
    path.write_text('["abcdefghij" , {"error": "scripted 429"}]')
    m = make_client(ModelConfig(f"scripted:{path}"))
    assert isinstance(m, ScriptedModel)
    chunks = []
    m.chunk_chars = 3
    assert m.complete(MSG, on_token=chunks.append).text == "abcdefghij"
    assert chunks == ["abc", "def", "ghi", "j"]
    with pytest.raises(ModelError, match="scripted 429"):
        m.complete(MSG)
    with pytest.raises(ModelError, match="no replies left"):
        m.complete(MSG)
    with pytest.raises(ModelError, match="cannot read scripted replies"):
        make_client(ModelConfig(f"scripted:{tmp_path / 'missing.json'}"))
