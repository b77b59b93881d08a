"""Scoped sources: allowed and blocked domains."""

from __future__ import annotations

from program.web.base import SearchHit
from program.web.config import domain_list
from program.web.scope import DomainScope, host_in


def test_domains_cover_their_subdomains_only():
    assert host_in("en.wikipedia.org", ["wikipedia.org"]) and host_in("WIKIPEDIA.ORG.", ["wikipedia.org"])
    assert not host_in("notwikipedia.org", ["wikipedia.org"]) and not host_in("wikipedia.org.evil.com",
                                                                              ["wikipedia.org"])


def test_allowed_blocked_and_empty_scopes():
    scope = DomainScope(allowed=("wikipedia.org", "britannica.com"), blocked=("fr.wikipedia.org",))
    assert scope.allows("https://en.wikipedia.org/wiki/Harbin")
    assert scope.allows("https://www.britannica.com/place/Harbin")
    assert not scope.allows("https://fr.wikipedia.org/wiki/Harbin")  # blocked wins
    assert not scope.allows("https://example.com/harbin") and not scope.allows("not a url")
    assert DomainScope().allows("https://anything.example/") and not DomainScope().restricted
    assert DomainScope(blocked="spam.example").allows("https://ok.example/")
    assert not DomainScope(blocked="spam.example").allows("https://www.spam.example/")


def test_split_keeps_order_and_counts_drops():
    hits = [SearchHit(url=u, title="", snippet="") for u in
            ("https://a.example/1", "https://en.wikipedia.org/x", "https://b.example/2", "https://de.wikipedia.org/y")]
    kept, dropped = DomainScope(allowed=["wikipedia.org"]).split(hits)
    assert [h.url for h in kept] == ["https://en.wikipedia.org/x", "https://de.wikipedia.org/y"]
    assert [h.url for h in dropped] == ["https://a.example/1", "https://b.example/2"]


def test_domain_lists_are_normalised():
    assert domain_list(" Wikipedia.org, ,.BBC.co.uk ") == ("wikipedia.org", "bbc.co.uk")
    assert domain_list(["A.org"]) == ("a.org",) and domain_list(None) == ()
