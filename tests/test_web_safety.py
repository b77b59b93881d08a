"""URL safety: only http(s), no internal addresses, every redirect hop checked."""

from __future__ import annotations

import ipaddress
import re
import socket

import pytest

from program.web.config import WebConfig
from program.web.fetch import FetchError, PageFetcher
from program.web.safety import UnsafeURLError, check_url
from program.web.scope import DomainScope


def resolver_to(*addresses):
    def resolve(host, port, **kwargs):
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in addresses]
    return resolve


@pytest.mark.parametrize("url", ["ftp://example.org/file", "file:///etc/passwd", "javascript:alert(1)",
                                 "gopher://example.org/", "example.org/no-scheme"])
def test_only_http_and_https(url):
    with pytest.raises(UnsafeURLError, match="only http and https URLs are fetched"):
        check_url(url, resolver=resolver_to("93.184.216.34"))


@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.5.4", "192.168.1.1",
                                     "169.254.169.254", "0.0.0.0", "100.64.0.1", "224.0.0.1", "240.0.0.1",
                                     "255.255.255.255", "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "::"])
def test_internal_addresses_are_refused(address):
    host = f"[{address}]" if ":" in address else address
    shown = re.escape(str(ipaddress.ip_address(address)))  # ::ffff:127.0.0.1 prints as ::ffff:7f00:1
    with pytest.raises(UnsafeURLError, match=rf"resolves to the internal address {shown} "):
        check_url(f"http://{host}/x")  # an IP literal: getaddrinfo answers without any network


def test_public_addresses_pass():
    assert check_url("https://93.184.216.34/wiki/Harbin") == "https://93.184.216.34/wiki/Harbin"
    assert check_url("http://en.wikipedia.org/wiki/Harbin",
                     resolver=resolver_to("208.80.154.224", "2620:0:861:ed1a::1"))


def test_a_name_is_refused_if_any_address_is_internal():
    with pytest.raises(UnsafeURLError, match=r"intranet\.example resolves to the internal address 10\.9\.8\.7"):
        check_url("https://intranet.example/", resolver=resolver_to("93.184.216.34", "10.9.8.7"))


def test_unresolvable_and_hostless_urls_are_refused():
    def fail(host, port, **kwargs):
        raise socket.gaierror(-2, "Name or service not known")
    with pytest.raises(UnsafeURLError, match=r"cannot resolve host 'nowhere\.invalid'"):
        check_url("http://nowhere.invalid/", resolver=fail)
    with pytest.raises(UnsafeURLError, match="no host"):
        check_url("http:///path")


def test_configuration_can_allow_private_addresses():
    assert check_url("http://10.0.0.5/", allow_private=True)
    assert check_url("http://127.0.0.1:8080/", private_networks=("127.0.0.1/32",))
    with pytest.raises(UnsafeURLError, match="10.0.0.5"):
        check_url("http://10.0.0.5/", private_networks=("127.0.0.1/32",))  # only the listed network
    with pytest.raises(UnsafeURLError, match="only http and https"):
        check_url("ftp://10.0.0.5/", allow_private=True)  # the scheme rule stays


def test_the_fetcher_refuses_the_loopback_server_by_default(web_server):
    config = WebConfig(cache_ttl=0, retries=0)
    with pytest.raises(FetchError, match=r"refused .*127\.0\.0\.1 resolves to the internal address 127\.0\.0\.1 "
                                         r"\(allow it with --allow-private-urls"):
        PageFetcher(config).fetch(f"{web_server.base}/pages/acme.html")
    assert web_server.requests == []  # refused before any connection


def test_a_redirect_to_a_private_address_is_refused(web_server, web_config):
    with pytest.raises(FetchError, match=r"/redirect/private: refused 'http://10\.0\.0\.1/secret': "
                                         r"10\.0\.0\.1 resolves to the internal address 10\.0\.0\.1"):
        PageFetcher(web_config).fetch(f"{web_server.base}/redirect/private")
    with pytest.raises(FetchError, match=r"refused 'ftp://127\.0\.0\.1/file': only http and https"):
        PageFetcher(web_config).fetch(f"{web_server.base}/redirect/ftp")


def test_a_redirect_out_of_scope_is_refused(web_server, web_config):
    start = web_server.base.replace("127.0.0.1", "localhost") + "/redirect/1"  # → /redirect/2 → 127.0.0.1
    fetcher = PageFetcher(web_config.with_(allow_private=True), scope=DomainScope(allowed=("localhost",)))
    with pytest.raises(FetchError, match=r"redirected out of the allowed sources to http://127\.0\.0\.1:\d+/pages/acme\.html"):
        fetcher.fetch(start)
