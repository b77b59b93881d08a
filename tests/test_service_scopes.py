"""Who may read what, over the real service: filters on ``/ask``, ``/ask/stream`` and the chat API,
keys scoped to halves of the help centre's documents, the keys file read again while serving,
and an audit line per question. A ``serve`` process on a loopback port, the official ``openai``
client, a fake LM served over HTTP that answers with the first strip it is given (``citing_lm``:
every answer cites a document, so a citation outside a key's scope would show)."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

from program.app.service.keys import append_entry, new_key_entry
from tests.service_process import ServiceProcess, program_env, read_events, write_docs

pytestmark = pytest.mark.slow  # starts a server process: left out of the inner loop

ROOT = Path(__file__).resolve().parent.parent
HELP_CENTRE = ROOT / "eval_sets" / "adversarial" / "kb"
LEFT, RIGHT = "[0-9a-i]*.md", "[j-z]*.md"  # disjoint halves of the help centre's 63 files: 29 and 34


@pytest.fixture(scope="module")
def scoped(citing_lm, tmp_path_factory):
    """``serve`` over the help centre (``help``) and a two-document knowledge base (``docs``), with
    a keys file: ``left`` and ``right`` read one half of the help centre each, ``ops`` everything."""
    root = tmp_path_factory.mktemp("scoped-service")
    corpus = root / "help"
    shutil.copytree(HELP_CENTRE, corpus)
    docs = write_docs(root / "docs")
    keys = {}
    for name, scopes in (("left", {"help": [LEFT]}), ("right", {"help": [RIGHT]}),
                         ("ops", {"help": ["**"], "docs": ["**"]})):
        keys[name], entry = new_key_entry(name, scopes)
        append_entry(root / "keys.toml", entry)
    trace = root / "trace.jsonl"
    process = ServiceProcess(["--model", "openai/fake", "--api-base", citing_lm.base, "--kb", f"help={corpus}",
                              "--kb", f"docs={docs}", "--compiled", "none", "--web", "none", "--keys",
                              str(root / "keys.toml"), "--trace-jsonl", str(trace), "--no-cache"],
                             program_env(root / "cache"), root / "serve.log")
    process.keys, process.keys_file, process.trace = keys, root / "keys.toml", trace
    yield process
    process.stop()


def _ask(service, key: str, body: dict) -> httpx.Response:
    return httpx.post(f"{service.base}/ask", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120)


def _files(citations) -> set[str]:
    return {c["source_id"].rsplit("#", 1)[0] for c in citations}


def _in(pattern: str, name: str) -> bool:
    from wcmatch import glob

    return glob.globmatch(name, pattern)


def test_a_filter_narrows_the_citations_on_every_surface(scoped):
    key = scoped.keys["ops"]
    question, only = "How do I rotate an API key?", {"paths": ["refunds.md"]}
    whole = _ask(scoped, key, {"question": question, "knowledge_base": "help"}).json()
    assert whole["filter"] == {} and _files(whole["citations"]) and _files(whole["citations"]) != {"refunds.md"}
    narrowed = _ask(scoped, key, {"question": question, "knowledge_base": "help", "filter": only}).json()
    assert narrowed["filter"] == {"paths": [["refunds.md"]]} and _files(narrowed["citations"]) == {"refunds.md"}
    assert "filter: path refunds.md" in narrowed["trace"]["events"]
    with httpx.stream("POST", f"{scoped.base}/ask/stream", headers={"Authorization": f"Bearer {key}"}, timeout=120,
                      json={"question": question, "knowledge_base": "help", "filter": only}) as response:
        events = read_events(response)
    shown = dict(events)["filter"]
    assert (shown["filter"], shown["files"]) == ({"paths": [["refunds.md"]]}, 1)
    result = dict(events)["result"]["result"]
    assert _files(result["citations"]) == {"refunds.md"} and result["filter"] == {"paths": [["refunds.md"]]}
    client = openai.OpenAI(base_url=f"{scoped.base}/v1", api_key=key, max_retries=0, timeout=120)
    reply = client.chat.completions.create(model="help", messages=[{"role": "user", "content": question}],
                                           extra_body={"filter": only})
    extra = reply.model_extra
    assert {c["file"] for c in extra["citations"]} == {"refunds.md"} and extra["crag"]["filter"] == {
        "paths": [["refunds.md"]]}
    chunks = list(client.chat.completions.create(model="help", messages=[{"role": "user", "content": question}],
                                                 extra_body={"filter": only}, stream=True))
    assert {c["file"] for c in chunks[-1].model_extra["citations"]} == {"refunds.md"}


def test_a_filter_that_keeps_nothing_says_so(scoped):
    body = {"question": "How do I rotate an API key?", "knowledge_base": "help", "filter": {"types": ["pdf"]}}
    result = _ask(scoped, scoped.keys["ops"], body).json()
    assert result["answer"] == "No documents match the filter: type pdf." and result["citations"] == []
    assert result["outcome"]["ending"] == "no-documents" and result["trace"]["lm_calls"] == 0


@pytest.mark.parametrize("flt, status", [({"paths": ["../docs/*"]}, 422), ({"paths": ["/etc/passwd"]}, 422),
                                         ({"paths": ["C:/help/*"]}, 422), ({"paths": "**", "folder": "x"}, 422)])
def test_a_filter_that_leaves_the_folder_is_refused(scoped, flt, status):
    response = _ask(scoped, scoped.keys["left"], {"question": "How do I rotate an API key?", "filter": flt})
    assert response.status_code == status and "\n" not in response.json()["detail"]


def test_a_request_cannot_widen_its_keys_scope(scoped):
    left = scoped.keys["left"]
    widened = _ask(scoped, left, {"question": "How do I close my account?", "filter": {"paths": ["**"]}}).json()
    assert widened["filter"] == {"paths": [[LEFT], ["**"]]}
    assert _files(widened["citations"]) and all(_in(LEFT, f) for f in _files(widened["citations"]))
    outside = _ask(scoped, left, {"question": "How do I refund a payment?", "filter": {"paths": ["refunds.md"]}})
    assert outside.json()["outcome"]["ending"] == "no-documents" and outside.json()["citations"] == []
    other = _ask(scoped, left, {"question": "Who founded Acme Rockets?", "knowledge_base": "docs"})
    assert other.status_code == 404 and other.json()["detail"] == (
        "model 'docs': no such knowledge base here; this server has 'help'")
    client = openai.OpenAI(base_url=f"{scoped.base}/v1", api_key=left, max_retries=0, timeout=60)
    assert [m.id for m in client.models.list()] == ["help"]
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="docs", messages=[{"role": "user", "content": "Who founded Acme?"}])
    ops = openai.OpenAI(base_url=f"{scoped.base}/v1", api_key=scoped.keys["ops"], max_retries=0, timeout=60)
    assert [m.id for m in ops.models.list()] == ["help", "docs"]
    assert _ask(scoped, "crag-not-a-key-at-all-000000", {"question": "Hello there?"}).status_code == 401


def test_the_help_centre_test_split_through_two_keys_cites_nothing_outside_each_scope(scoped):
    questions = [json.loads(line)["question"] for line in (ROOT / "eval_sets/adversarial/queries.jsonl").open()
                 if json.loads(line)["split"] == "test"]
    assert len(questions) == 158
    for name, pattern in (("left", LEFT), ("right", RIGHT)):
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda q: _ask(scoped, scoped.keys[name], {"question": q}).json(), questions))
        cited = [f for r in results for f in _files(r["citations"])]
        assert len(cited) > 100, name  # the fake reader cites its first strip: most answers cite something
        assert [f for f in cited if not _in(pattern, f)] == [], name
        read = {g["passage_id"].rsplit("#", 1)[0] for r in results for g in r["grades"] + r["corrected_grades"]}
        assert read and all(_in(pattern, f) for f in read), name  # nothing outside the scope was even graded
        client = openai.OpenAI(base_url=f"{scoped.base}/v1", api_key=scoped.keys[name], max_retries=0, timeout=120)
        for question in questions[:8]:  # streamed, and through the chat API
            with httpx.stream("POST", f"{scoped.base}/ask/stream", json={"question": question}, timeout=120,
                              headers={"Authorization": f"Bearer {scoped.keys[name]}"}) as response:
                events = dict(read_events(response))
            assert all(_in(pattern, f) for f in _files(events["result"]["result"]["citations"]))
            reply = client.chat.completions.create(model="help", messages=[{"role": "user", "content": question}])
            assert all(_in(pattern, c["file"]) for c in reply.model_extra["citations"])


def test_each_question_leaves_an_audit_line_without_its_text(scoped):
    question = "What does the audit say about webhooks?"
    request = _ask(scoped, scoped.keys["right"], {"question": question}).headers["x-request-id"]
    lines = [line for line in scoped.log.read_text().splitlines() if f'"request": "{request}"' in line]
    assert len(lines) == 1 and "program.audit" in lines[0] and question not in lines[0]
    record = json.loads(lines[0].split("program.audit: ", 1)[1])
    assert record["key"] == "right" and record["knowledge_base"] == "help"
    assert record["filter"] == {"paths": [[RIGHT]]} and record["outcome"] in ("draft", "corrected", "declined")
    assert scoped.keys["right"] not in scoped.log.read_text()
    traced = [json.loads(line) for line in scoped.trace.read_text().splitlines()]
    assert [t for t in traced if t.get("request") == request and t["event"] == "audit"] == [
        {"event": "audit", **record}]


def test_the_keys_file_is_read_again_while_serving(scoped):
    late, entry = new_key_entry("late", {"help": ["refunds.md"]})
    assert _ask(scoped, late, {"question": "How do I refund a payment?"}).status_code == 401
    append_entry(scoped.keys_file, entry)
    result = _ask(scoped, late, {"question": "How do I refund a payment?"}).json()
    assert _files(result["citations"]) == {"refunds.md"}
    before = scoped.keys_file.read_text()
    scoped.keys_file.write_text(before.replace('"help" = ["refunds.md"]', '"help" = ["payouts.md"]'))
    result = _ask(scoped, late, {"question": "How do I refund a payment?"}).json()
    assert _files(result["citations"]) <= {"payouts.md"} and result["filter"] == {"paths": [["payouts.md"]]}
    scoped.keys_file.write_text("this is not TOML [[")  # a broken file keeps the keys read before
    assert _ask(scoped, late, {"question": "How do I refund a payment?"}).status_code == 200
    assert "not TOML" in scoped.log.read_text()
    scoped.keys_file.write_text(before)
