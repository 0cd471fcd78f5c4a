"""One client per endpoint (mmfaith/clients.py): planners, judges and editors calling an endpoint many
times build one client and reuse its connection, against a real HTTP server on 127.0.0.1."""
from __future__ import annotations

import pytest

from mmfaith.clients import ModelEndpoint, ask_with_images, gemini_client, openai_client

from tests.chat_server import ChatServer

CALLS = 6


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_many_calls_build_one_client_and_open_one_connection(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMFAITH_TEST_KEY", "k-1")
    with ChatServer(default="fine") as server:
        base = server.openai_base_url if provider == "openai" else server.url
        endpoint = ModelEndpoint(provider, "m", base_url=base, api_key_env="MMFAITH_TEST_KEY", max_retries=0)
        make = openai_client if provider == "openai" else gemini_client
        first = make(endpoint)
        answers = [ask_with_images(endpoint, f"question {i}", []) for i in range(CALLS)]
        assert make(ModelEndpoint(provider, "m", base_url=base, api_key_env="MMFAITH_TEST_KEY", max_retries=0)) is first
        calls = server.completion_requests()
    assert answers == ["fine"] * CALLS and len(calls) == CALLS
    assert len({call.client_port for call in calls}) == 1, "every call should reuse the first call's connection"


def test_a_changed_key_or_endpoint_gets_its_own_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMFAITH_TEST_KEY", "k-1")
    endpoint = ModelEndpoint("openai", "m", base_url="http://127.0.0.1:9/v1", api_key_env="MMFAITH_TEST_KEY")
    first = openai_client(endpoint)
    assert openai_client(ModelEndpoint("openai", "other", base_url="http://127.0.0.1:9/v1",
                                       api_key_env="MMFAITH_TEST_KEY")) is not first
    monkeypatch.setenv("MMFAITH_TEST_KEY", "k-2")
    assert openai_client(endpoint) is not first and openai_client(endpoint).api_key == "k-2"
