"""The keys file: what an entry may say, who a key names, and the file read again when it changes."""

from __future__ import annotations

import os

import pytest

from program.app.service.access import Access
from program.app.service.keys import (ANYONE, OPERATOR, KeysFile, KeysFileError, append_entry, key_hash,
                                      new_key_entry, parse_keys)
from program.retrieval.filters import DocumentFilter

GOOD = f"""
[[keys]]
name = "hr"
sha256 = "{key_hash('hr-secret-0000000000')}"
[keys.knowledge_bases]
handbook = ["hr/**"]
runbooks = {{ paths = ["db/**"], types = ["md"] }}
k8s = ["**"]
"""


def test_an_entry_gives_a_scope_per_knowledge_base():
    (principal,) = parse_keys(GOOD).values()
    assert principal.name == "hr" and principal.may_ask("handbook") and not principal.may_ask("finance")
    assert principal.scope("handbook") == DocumentFilter(paths=(("hr/**",),))
    assert principal.scope("runbooks") == DocumentFilter(paths=(("db/**",),), types=frozenset({"md"}))
    assert principal.scope("k8s") is None  # the whole knowledge base
    narrowed = principal.documents("handbook", DocumentFilter(paths=(("**/*.pdf",),)))
    assert narrowed.paths == (("hr/**",), ("**/*.pdf",))  # the request's filter within the key's, never instead


@pytest.mark.parametrize("text, message", [
    ("[[keys]]\nname = 'a'\n", "keys.toml: key 1 ('a'): sha256 must be the key's SHA-256 in 64 hex digits"),
    (f"[[keys]]\nsha256 = '{'a' * 64}'\n", "keys.toml: key 1: needs a name"),
    (f"[[keys]]\nname = 'a'\nsha256 = '{'a' * 64}'\n", "keys.toml: key 1 ('a'): needs [keys.knowledge_bases] "
                                                     "naming what it may ask"),
    (f"[[keys]]\nname = 'a'\nsha256 = '{'a' * 64}'\nknowledge_bases = {{ h = ['../x'] }}\n",
     "keys.toml: key 1 ('a'): paths: '../x' leaves the knowledge base's folder ('..')"),
    (f"[[keys]]\nname = 'a'\nsha256 = '{'a' * 64}'\nknowledge_bases = {{ h = [] }}\n",
     "keys.toml: key 1 ('a'): h: expected a list of path globs, a filter table, or [\"**\"] for everything"),
    (f"[[keys]]\nname = 'a'\nsha256 = '{'a' * 64}'\nrole = 'admin'\nknowledge_bases = {{ h = ['**'] }}\n",
     "keys.toml: key 1 ('a'): unknown field 'role'"),
    ("keys = 3", "keys.toml: expected [[keys]] tables only"),
    ("[[keys]\n", "keys.toml: not TOML"),
])
def test_a_bad_entry_is_one_line_naming_the_file_and_the_entry(text, message):
    with pytest.raises(KeysFileError) as err:
        parse_keys(text, "keys.toml")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_file_is_read_again_when_it_changes_and_a_broken_one_keeps_the_keys(tmp_path, caplog):
    path = tmp_path / "keys.toml"
    first, entry = new_key_entry("first", {"handbook": ["**"]})
    append_entry(path, entry)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    keys = KeysFile(path)
    second, entry = new_key_entry("second", {"handbook": ["hr/**"]})
    assert keys.principal(first).name == "first" and keys.principal(second) is None
    append_entry(path, entry)
    assert keys.principal(second).scope("handbook") == DocumentFilter(paths=(("hr/**",),))
    path.write_text(path.read_text() + "[[keys]\n")
    os.utime(path, ns=(path.stat().st_mtime_ns + 1_000_000, path.stat().st_mtime_ns + 1_000_000))
    assert keys.principal(second).name == "second" and "keeping the 2 keys read before" in caplog.text
    twice = new_key_entry("a", {"h": ["**"]})[1] + new_key_entry("a", {"h": ["**"]})[1]
    with pytest.raises(KeysFileError, match="name given twice"):
        append_entry(tmp_path / "twice.toml", twice)
    assert not (tmp_path / "twice.toml").exists()


def test_the_operator_key_and_the_keys_file_together(tmp_path):
    secret, entry = new_key_entry("support", {"help": ["refund*"]})
    append_entry(tmp_path / "keys.toml", entry)
    access = Access.for_server("127.0.0.1", "operator-key-0123456789", keys=KeysFile(tmp_path / "keys.toml"))
    assert access.principal("Bearer operator-key-0123456789") is OPERATOR
    assert access.principal(f"Bearer {secret}").name == "support"
    assert access.principal(f"Basic {secret}") is None and access.principal("Bearer wrong") is None
    assert access.principal("") is None and Access.for_server("127.0.0.1", None).principal("") is ANYONE


def test_a_key_for_no_knowledge_base_served_here_is_told_so_in_one_line():
    from program.app.service.app import pick
    from program.app.service.keys import Principal
    from program.app.service.runner import ServiceError

    runners = {"help": object(), "docs": object()}
    elsewhere = Principal("elsewhere", {"finance": None})
    with pytest.raises(ServiceError, match="^this key may ask no knowledge base this server has$") as err:
        pick(runners, None, elsewhere)
    assert err.value.status == 404
    assert pick(runners, None, Principal("docs-only", {"docs": None})) is runners["docs"]
    with pytest.raises(ServiceError, match="^model 'help': no such knowledge base here; this server has 'docs'$"):
        pick(runners, "help", Principal("docs-only", {"docs": None}))
