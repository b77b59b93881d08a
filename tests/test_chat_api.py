"""OpenAI's chat API on ``serve``, driven by the official ``openai`` client against the service as a
real process (the served fake LM, the two-document knowledge base, a key), and the access rules:
the key, the hosts, ``HEAD /healthz``."""

from __future__ import annotations

import httpx
import openai
import pytest

from program.types import FALLBACK_ANSWER

pytestmark = pytest.mark.slow  # starts a server: left out of the inner loop

KEY = "chat-test-key-0123456789"


@pytest.fixture(scope="module")
def keyed_service(served_fake_lm, tmp_path_factory):
    """``serve`` with a key (``CRAG_SERVE_API_KEY``) on two knowledge bases: the small one, ``docs``
    (named by its folder), and ``rivers`` (named by the operator), a folder of one document."""
    from tests.service_process import ServiceProcess, program_env, write_docs

    root = tmp_path_factory.mktemp("keyed-service")
    docs = write_docs(root / "docs")
    (root / "nile").mkdir()
    (root / "nile" / "nile.md").write_text("# Nile\n\nThe Nile flows through eleven countries of Africa.\n")
    process = ServiceProcess(["--model", "openai/fake", "--api-base", served_fake_lm.base, "--kb", str(docs),
                              "--kb", f"rivers={root / 'nile'}", "--compiled", "none", "--web", "none", "--no-cache"],
                             program_env(root / "cache", CRAG_SERVE_API_KEY=KEY), root / "serve.log")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client(keyed_service):
    return openai.OpenAI(base_url=f"{keyed_service.base}/v1", api_key=KEY, max_retries=0, timeout=60)


def test_the_models_are_the_knowledge_bases(client):
    assert [m.id for m in client.models.list()] == ["docs", "rivers"]


def test_a_plain_question_is_answered_with_its_citations_and_verdict(client):
    reply = client.chat.completions.create(model="docs", messages=[
        {"role": "system", "content": "You are a pirate."},  # read by nobody: the program's prompts are its own
        {"role": "user", "content": "Who founded Acme Rockets?"}])
    assert reply.object == "chat.completion" and reply.model == "docs"
    assert reply.choices[0].message.content == "Acme Rockets was founded by Jane Roe [1]."
    assert reply.choices[0].finish_reason == "stop" and reply.usage.total_tokens > 0
    assert 0 <= reply.usage.prompt_tokens_details.cached_tokens <= reply.usage.prompt_tokens
    assert reply.citations == [{"number": 1, "file": "acme.md", "page": 0, "title": "Acme Rockets", "url": "",
                                "label": "acme.md#0"}]
    assert reply.crag["declined"] is False and reply.crag["action"] == "correct"
    assert reply.crag["question"] == "Who founded Acme Rockets?" and reply.crag["asked"] == "Who founded Acme Rockets?"


def test_a_streamed_answer_comes_in_words_then_the_verdict_then_usage(client):
    stream = client.chat.completions.create(model="docs", stream=True, stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": "Who founded Acme Rockets?"}])
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    words = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(words) == 8 and "".join(words) == "Acme Rockets was founded by Jane Roe [1]."
    last = [c for c in chunks if c.choices][-1]
    assert last.choices[0].finish_reason == "stop" and last.crag["declined"] is False
    assert last.citations[0]["file"] == "acme.md"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert len({c.id for c in chunks}) == 1


def test_a_follow_up_is_read_as_the_standalone_question(client):
    reply = client.chat.completions.create(model="docs", messages=[
        {"role": "user", "content": "What does Acme Rockets build?"},
        {"role": "assistant", "content": "Acme Rockets builds small sounding rockets [1]."},
        {"role": "user", "content": "Who founded it?"}])
    assert reply.crag["asked"] == "Who founded it?" and reply.crag["question"] == "Who founded Acme Rockets?"
    assert reply.choices[0].message.content == "Acme Rockets was founded by Jane Roe [1]."


def test_a_declined_question_is_a_normal_reply_saying_so(client):
    reply = client.chat.completions.create(model="docs", messages=[
        {"role": "user", "content": "What is the capital of Freedonia?"}])
    assert reply.choices[0].message.content == FALLBACK_ANSWER and reply.choices[0].finish_reason == "stop"
    assert reply.crag["declined"] is True and reply.crag["reason"] and reply.citations == []


def test_a_wrong_or_missing_key_is_a_401(keyed_service):
    for key in ("wrong-key-0123456789", KEY + "x"):
        with pytest.raises(openai.AuthenticationError) as caught:
            openai.OpenAI(base_url=f"{keyed_service.base}/v1", api_key=key, max_retries=0).models.list()
        assert caught.value.status_code == 401 and "API key" in caught.value.message
    bare = httpx.post(f"{keyed_service.base}/ask", json={"question": "Who founded Acme Rockets?"})
    assert bare.status_code == 401 and bare.headers["www-authenticate"] == "Bearer"
    assert bare.json() == {"detail": "no API key: send Authorization: Bearer <key>"}


def test_an_unknown_knowledge_base_is_a_404_naming_the_known_ones(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi?"}])
    assert caught.value.status_code == 404
    assert caught.value.body["message"] == \
        "model 'gpt-4o': no such knowledge base here; this server has 'docs', 'rivers'"


def test_each_knowledge_base_answers_from_its_own_documents(client, keyed_service):
    reply = client.chat.completions.create(model="rivers", messages=[
        {"role": "user", "content": "How many countries does the Nile flow through?"}])
    assert reply.model == "rivers"
    auth = {"Authorization": f"Bearer {KEY}"}
    asked = httpx.post(f"{keyed_service.base}/ask", headers=auth, timeout=60,
                       json={"question": "How many countries does the Nile flow through?", "knowledge_base": "rivers"})
    assert [g["passage_id"].split("#")[0] for g in asked.json()["grades"]] == ["nile.md"]
    default = httpx.post(f"{keyed_service.base}/ask", headers=auth, timeout=60,
                         json={"question": "How many countries does the Nile flow through?"})
    assert {g["passage_id"].split("#")[0] for g in default.json()["grades"]} == {"acme.md", "danube.md"}
    unknown = httpx.post(f"{keyed_service.base}/ask", headers=auth, timeout=60,
                         json={"question": "Who founded Acme Rockets?", "knowledge_base": "../etc"})
    assert unknown.status_code == 422  # the schema names the knowledge bases
    assert unknown.json()["detail"] == "knowledge_base: Input should be 'docs' or 'rivers'"
    health = httpx.get(f"{keyed_service.base}/healthz", headers=auth).json()  # without the key: status only
    assert [(kb["model"], kb["chunks"]) for kb in health["knowledge_bases"]] == [("docs", 2), ("rivers", 1)]


def test_the_health_check_needs_no_key_and_answers_head(keyed_service):
    assert httpx.get(f"{keyed_service.base}/healthz").status_code == 200
    head = httpx.head(f"{keyed_service.base}/healthz")
    assert head.status_code == 200 and head.content == b""


def test_a_rebound_host_or_a_foreign_origin_is_refused(keyed_service):
    auth = {"Authorization": f"Bearer {KEY}"}
    rebound = httpx.post(f"{keyed_service.base}/ask", json={"question": "Who founded Acme Rockets?"},
                         headers={**auth, "Host": "evil.example", "Origin": "http://evil.example"})
    assert rebound.status_code == 400
    assert rebound.json() == {"detail": "host 'evil.example' is not served here (serve --allowed-hosts adds names)"}
    foreign = httpx.post(f"{keyed_service.base}/ask", json={"question": "Who founded Acme Rockets?"},
                         headers={**auth, "Origin": "https://evil.example"})
    assert foreign.status_code == 403 and "evil.example" in foreign.json()["detail"]
    own = httpx.get(f"{keyed_service.base}/v1/models", headers={**auth, "Host": "localhost:1", "Origin":
                                                                   keyed_service.base})
    assert own.status_code == 200
