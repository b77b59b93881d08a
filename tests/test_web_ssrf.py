"""The web path never reaches an internal address: DNS names that resolve to one, numeric host
spellings of one, and redirects into either, through the fetcher and through the web path; and a name that answers
differently once checked (DNS rebinding) is still fetched from the address that was checked."""

from __future__ import annotations

import contextlib
import functools
import http.server
import ipaddress
import re
import socket
import threading
from urllib.parse import quote

import pytest

from program.stages.web_path import WebSearcher
from program.web.base import SearchHit
from program.web.fetch import FetchError, PageFetcher
from program.web.safety import UnsafeURLError, check_url
from tests.web_server import Handler

PRIVATE_NAMES = {
    # name: the addresses its DNS answers with
    "metadata.cloud.test": ["169.254.169.254"],
    "intranet.corp.test": ["10.20.30.40"],
    "router.home.test": ["192.168.0.1"],
    "localtest.test": ["127.0.0.1"],
    "carrier-nat.test": ["100.64.12.1"],
    "v6-unique-local.test": ["fd12:3456::1"],
    "v6-mapped.test": ["::ffff:10.0.0.1"],
    "v6-link-local.test": ["fe80::1%eth0"],
    "half-public.test": ["93.184.216.34", "172.16.0.9"],  # one internal answer is enough
    "unspecified.test": ["0.0.0.0"],
}


def resolver(table):
    """A getaddrinfo stand-in answering from ``table`` (and real resolution for IP literals)."""
    def resolve(host, port, **kwargs):
        if host in table:
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                    for a in table[host]]
        return socket.getaddrinfo(host, port, **kwargs)
    return resolve


@pytest.mark.parametrize("name", sorted(PRIVATE_NAMES))
def test_a_name_resolving_to_an_internal_address_is_refused(name):
    internal = [a for a in PRIVATE_NAMES[name] if not a.startswith("93.")][0].split("%")[0]
    shown = re.escape(str(__import__("ipaddress").ip_address(internal)))
    with pytest.raises(UnsafeURLError, match=rf"refused 'https://{re.escape(name)}/page': {re.escape(name)} "
                                             rf"resolves to the internal address {shown} "):
        check_url(f"https://{name}/page", resolver=resolver(PRIVATE_NAMES))


@pytest.mark.parametrize("host, address", [("2130706433", "127.0.0.1"), ("0x7f000001", "127.0.0.1"),
                                           ("0177.0.0.1", "127.0.0.1"), ("127.1", "127.0.0.1"),
                                           ("10.1", "10.0.0.1"), ("0", "0.0.0.0"),
                                           ("[::ffff:7f00:1]", "::ffff:7f00:1"),
                                           ("[0:0:0:0:0:ffff:a9fe:a9fe]", "::ffff:a9fe:a9fe")])
def test_numeric_spellings_of_internal_addresses_are_refused(host, address):
    # decimal, hex, octal and short forms: getaddrinfo reads them as addresses, so does the check
    with pytest.raises(UnsafeURLError, match=rf"resolves to the internal address {re.escape(address)} "):
        check_url(f"http://{host}/latest/meta-data/")


@pytest.mark.parametrize("name", ["metadata.cloud.test", "intranet.corp.test", "v6-mapped.test", "half-public.test"])
def test_a_redirect_into_a_name_resolving_internally_is_refused_before_any_request(name, web_server, web_config):
    fetcher = PageFetcher(web_config, resolver=resolver(PRIVATE_NAMES))
    start = f"{web_server.base}/redirect/to?url={quote(f'http://{name}/secret', safe='')}"
    with pytest.raises(FetchError, match=rf"refused 'http://{re.escape(name)}/secret': {re.escape(name)} resolves to "
                                         r"the internal address"):
        fetcher.fetch(start)
    assert [r[1] for r in web_server.requests] == [start.removeprefix(web_server.base)]  # only the first hop was made


@pytest.mark.parametrize("target", ["http://2852039166/latest", "http://[::ffff:a9fe:a9fe]/latest", "http://10.1/"])
def test_a_redirect_into_a_numeric_internal_address_is_refused(target, web_server, web_config):
    # (the loopback server itself is allowed here: web_config lists 127.0.0.1/32)
    with pytest.raises(FetchError, match=r"resolves to the internal address"):
        PageFetcher(web_config).fetch(f"{web_server.base}/redirect/to?url={quote(target, safe='')}")


def test_the_web_path_keeps_the_snippet_and_reports_the_refusal(web_config, fake_lm):
    class OneHit:  # a search engine whose only hit points into the intranet
        name = "one-hit"

        def search(self, query, k=3):
            return [SearchHit(url="http://intranet.corp.test/wiki/acme", title="Acme wiki",
                              snippet="Acme Rockets was founded by Jane Roe.", content="")]

    web = OneHit()
    searcher = WebSearcher(web, config=web_config, fetcher=PageFetcher(web_config, resolver=resolver(PRIVATE_NAMES)))
    result = searcher(question="Who founded Acme Rockets?", query="Acme Rockets founder")
    assert [p.text for p in result.passages] == ["Acme Rockets was founded by Jane Roe."]  # the search engine's snippet
    (failure,) = result.fetch_failures
    assert failure["url"] == "http://intranet.corp.test/wiki/acme" and failure["snippet_used"] is True
    assert failure["error"].startswith("refused 'http://intranet.corp.test/wiki/acme': intranet.corp.test resolves to "
                                       "the internal address 10.20.30.40")


class _Page(Handler):
    """Serves one HTML page naming the server (``server.label``) and records each request's Host."""

    def do_GET(self):  # http.server's name
        self.server.hosts.append(self.headers["Host"])
        self._send(200, f"<html><body><main><p>{self.server.label}: the page's text.</p></main></body></html>")


@contextlib.contextmanager
def _serving(address, port, label, tls=None):
    server = http.server.ThreadingHTTPServer((address, port), _Page)
    server.label, server.hosts = label, []
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_a_name_rebound_after_the_check_is_fetched_from_the_checked_address(monkeypatch, web_config):
    # DNS rebinding: the name answers an allowed address to the check, an internal one afterwards.
    # 127.0.0.1 is allowed (web_config), 127.0.0.2 stands for the internal service; same port.
    with _serving("127.0.0.1", 0, "public") as public:
        port = public.server_address[1]
        with _serving("127.0.0.2", port, "internal") as internal:
            real = socket.getaddrinfo

            def answering(address):
                def lookup(host, port, *args, **kwargs):
                    if host != "rebind.test":
                        return real(host, port, *args, **kwargs)
                    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
                return lookup

            # the check's lookups see the allowed address; any later lookup (urllib3's) the internal one
            monkeypatch.setattr(socket, "getaddrinfo", answering("127.0.0.2"))
            page = PageFetcher(web_config, resolver=answering("127.0.0.1")).fetch(f"http://rebind.test:{port}/page")
    assert page.text == "public: the page's text."
    assert internal.hosts == [] and public.hosts == [f"rebind.test:{port}"]  # the Host header keeps the name


@pytest.mark.parametrize("certified, ok", [("pinned.test", True), ("other.test", False)])
def test_https_to_the_checked_address_still_checks_the_certificate_against_the_name(certified, ok, web_config,
                                                                                      tmp_path):
    import ssl

    import requests
    import trustme

    from program.web.transport import get_at, make_session

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(certified).configure_cert(context)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    with _serving("127.0.0.1", 0, "tls", tls=context) as server, make_session(web_config) as session:
        url = f"https://pinned.test:{server.server_address[1]}/page"
        get = functools.partial(get_at, session, web_config, url, ipaddress.ip_address("127.0.0.1"),
                                timeout=5, verify=str(tmp_path / "ca.pem"))
        if ok:
            assert "tls: the page's text." in get().text
        else:  # a certificate for another name is refused, though the address is the one checked
            with pytest.raises(requests.exceptions.SSLError, match="pinned.test"):
                get()
