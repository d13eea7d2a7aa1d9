"""web_fetch, built from config entries: plain HTTP against a local fake website, and the hosted
readers (Jina Reader, Firecrawl) against local fakes of their APIs."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from typing import Any

import pytest
from langchain_core.tools import BaseTool

from agents.tools import config_tools
from agents.tools.community.errors import EgressRefused, FetchRefused
from agents.tools.community.web_fetch import WebFetchSettings, read_page
from bus.messages import EgressPolicy
from config import AppConfig
from tests.conftest import REPO
from tests.fakes.web_providers import FakeFirecrawl, FakeJina, FakeWebsite
from tests.support.fakes import fake_fixture

FETCH = "agents.tools.community.web_fetch:make_web_fetch"

ARTICLE = """<!doctype html>
<html><head>
  <title>Moths of Europe</title>
  <style>body { color: red; }</style>
  <script>window.trackingPixel = "tracker-7f3a";</script>
</head><body>
  <nav><a href="/">Site menu</a> <a href="/shop">Shop</a></nav>
  <main>
    <h1>Moths</h1>
    <p>Moths fly at <b>night</b>; read <a href="/moths/luna">about the luna moth</a>.</p>
    <ul><li>Luna moth</li><li>Atlas moth</li></ul>
    <div hidden>cookie banner text</div>
  </main>
  <footer>Copyright Moth Society</footer>
  <script>console.log("late-script-9c1e")</script>
</body></html>
"""


@pytest.fixture(autouse=True)
def no_provider_keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("JINA_API_KEY", "FIRECRAWL_API_KEY"):
        monkeypatch.delenv(variable, raising=False)


site = fake_fixture(FakeWebsite, "A website on loopback whose pages the test writes.")


jina = fake_fixture(FakeJina, "The fake Jina Reader.")


firecrawl = fake_fixture(lambda: FakeFirecrawl(api_key="fc-test"), "The fake Firecrawl, its key fc-test.")


def build(**extra: Any) -> BaseTool:
    """web_fetch as `config_tools` makes it from a config.yaml entry with these keys."""
    entry = {"name": "web_fetch", "use": FETCH, **extra}
    (tool,) = config_tools(AppConfig.model_validate({"tools": [entry]}))
    return tool


def direct(**extra: Any) -> BaseTool:
    """The http provider, allowed to reach the fakes on 127.0.0.1."""
    return build(provider="http", allow_private_networks=True, **extra)


# ------------------------------------------------------------------ plain HTTP


async def test_an_html_page_becomes_markdown_of_its_main_content(site: FakeWebsite) -> None:
    url = site.page("/moths", ARTICLE, "text/html; charset=utf-8")

    output = await direct().ainvoke({"url": url})

    assert output.startswith("# Moths of Europe\n\n# Moths\n")
    assert "Moths fly at **night**" in output
    assert f"[about the luna moth]({site.url('/moths/luna')})" in output, "links are absolute"
    assert "* Luna moth\n* Atlas moth" in output
    for left_out in ("tracker-7f3a", "late-script-9c1e", "color: red", "Site menu", "Copyright", "cookie"):
        assert left_out not in output


async def test_a_long_page_is_cut_at_max_chars_with_a_line_saying_so(site: FakeWebsite) -> None:
    paragraphs = "".join(f"<p>Paragraph {i} about moths and their habits.</p>" for i in range(400))
    url = site.page("/long", f"<html><body>{paragraphs}</body></html>", "text/html")

    output = await direct(max_chars=1000).ainvoke({"url": url})

    body, _, marker = output.rpartition("\n\n")
    assert len(body) <= 1000
    assert marker.startswith("[... cut: showing the first ")
    assert "Paragraph 0 about moths" in body
    assert "Paragraph 399" not in output


async def test_the_default_cap_is_about_four_kilobytes(site: FakeWebsite) -> None:
    url = site.page("/big.txt", "moth " * 5000, "text/plain")
    output = await direct().ainvoke({"url": url})
    assert 3000 < len(output) < 4096 + 100
    assert "[... cut: showing the first" in output


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        pytest.param(
            "text/plain; charset=utf-8", "Moths: 160,000 species.\nButterflies: 17,500.", id="plain"
        ),
        pytest.param("application/json", '{"species": 160000, "order": "Lepidoptera"}', id="json"),
        pytest.param("text/csv", "name,wingspan\nluna,11cm\natlas,25cm", id="csv"),
        pytest.param(None, "no content type, but clearly text", id="no-content-type"),
    ],
)
async def test_text_that_is_not_html_comes_back_as_it_is(
    site: FakeWebsite, content_type: str | None, body: str
) -> None:
    url = site.page("/data", body, content_type)
    assert await direct().ainvoke({"url": url}) == body


@pytest.mark.parametrize(
    ("content_type", "body", "what"),
    [
        pytest.param(
            "image/png", b"\x89PNG\r\n\x1a\n" + b"PIXELDATA" * 300, "an image (image/png, 3 KB)", id="png"
        ),
        pytest.param("application/pdf", b"%PDF-1.7\n" + b"PDFSTREAM " * 100, "a PDF document", id="pdf"),
        pytest.param("application/zip", b"PK\x03\x04" + b"ZIPPED" * 50, "a binary file", id="zip"),
        pytest.param(None, b"\x00\x01\x02BINARYBLOB" * 50, "a binary file", id="sniffed-binary"),
    ],
)
async def test_files_that_are_not_text_are_described_not_dumped(
    site: FakeWebsite, content_type: str | None, body: bytes, what: str
) -> None:
    url = site.page("/file", body, content_type)

    output = await direct().ainvoke({"url": url})

    assert output.startswith(f"{url} is {what}")
    assert "not a web page" in output
    for raw in ("PIXELDATA", "PDFSTREAM", "ZIPPED", "BINARYBLOB", "PNG\r\n"):
        assert raw not in output


async def test_a_redirect_is_followed_and_the_final_address_shown(site: FakeWebsite) -> None:
    site.page(
        "/new",
        "<html><head><title>New home</title></head><body><p>Moved here.</p></body></html>",
        "text/html",
    )
    old = site.redirect("/old", "/new")

    output = await direct().ainvoke({"url": old})

    assert output.startswith(f"# New home\n\n(redirected to {site.url('/new')})")
    assert "Moved here." in output


async def test_only_max_bytes_of_a_huge_page_are_read(site: FakeWebsite) -> None:
    url = site.page("/huge.txt", "x" * 50_000, "text/plain")
    output = await direct(max_bytes=2048, max_chars=100_000).ainvoke({"url": url})
    assert output.startswith("(only the first 2,048 bytes of the page were read)")
    assert output.count("x") == 2048


@pytest.mark.parametrize(
    ("trouble", "expected"),
    [
        pytest.param({"fail_with": 500}, "answered HTTP 500 (the site has a problem", id="http-500"),
        pytest.param({"hang": True}, "127.0.0.1 did not answer within 0.5s", id="timeout"),
    ],
)
async def test_a_failing_site_gives_an_error_line(
    site: FakeWebsite, trouble: dict[str, Any], expected: str
) -> None:
    for attribute, value in trouble.items():
        setattr(site, attribute, value)
    # Only the hanging site needs the short timeout: a 500 on a busy machine may take longer than 0.5 s.
    output = await direct(timeout_seconds=0.5 if "hang" in trouble else 10).ainvoke(
        {"url": site.url("/anything")}
    )
    assert output.startswith("Error: ")
    assert expected in output


async def test_a_missing_page_says_to_check_the_url(site: FakeWebsite) -> None:
    output = await direct().ainvoke({"url": site.url("/nowhere")})
    assert output == "Error: 127.0.0.1 answered HTTP 404 (there is no such page: check the URL)"


async def test_local_and_private_addresses_are_refused_unless_allowed(site: FakeWebsite) -> None:
    url = site.page("/secret", "internal admin page", "text/plain")

    output = await build(provider="http").ainvoke({"url": url})

    assert output.startswith(f"Error: will not fetch {url}: 127.0.0.1 is a private or local address")
    assert site.calls == [], "nothing was sent"
    assert await direct().ainvoke({"url": url}) == "internal admin page"


async def test_with_allowed_domains_only_those_hosts_are_fetched_redirects_included(
    site: FakeWebsite,
) -> None:
    site.page("/page", "an allowed page", "text/plain")
    secret = site.page("/secret", "internal admin page", "text/plain")
    site.redirect("/hop", secret)  # to 127.0.0.1, which the list does not name
    allowed = f"http://localhost:{site.port}"
    tool = direct(allowed_domains=["localhost"])

    assert await tool.ainvoke({"url": f"{allowed}/page"}) == "an allowed page"
    refused = await tool.ainvoke({"url": f"{allowed}/hop"})
    assert refused == (
        f"Error: will not fetch {secret}: 127.0.0.1 is not on this deployment's list of allowed domains"
    )
    assert await tool.ainvoke({"url": secret}) == refused
    asked = [params["path"] for method, params in site.calls if method == "get"]
    assert asked == ["/page", "/hop"], "the secret was never asked for"


async def test_a_refused_address_is_logged_with_the_run_that_tried_it(
    site: FakeWebsite, caplog: pytest.LogCaptureFixture
) -> None:
    url = site.page("/secret", "internal admin page", "text/plain")
    with caplog.at_level(logging.WARNING, logger="agents.tools.community._common"):
        output = await build(provider="http").ainvoke({"url": url}, config={"metadata": {"run_id": "run-7"}})
    assert output.startswith(f"Error: will not fetch {url}")
    assert any("run run-7" in r.getMessage() and url in r.getMessage() for r in caplog.records)
    assert site.calls == [], "nothing was sent"


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("file:///etc/passwd", id="file"),
        pytest.param("example.com/page", id="no-scheme"),
        pytest.param("ftp://example.com/file", id="ftp"),
    ],
)
async def test_urls_that_are_not_http_are_refused(url: str) -> None:
    output = await direct().ainvoke({"url": url})
    assert output == f"Error: will not fetch {url}: only absolute http:// and https:// URLs can be fetched"


# ------------------------------------------------------------------ Jina Reader


async def test_jina_returns_its_markdown_and_gets_the_whole_url(jina: FakeJina) -> None:
    page = "https://example.com/moths?lang=en"
    jina.pages[page] = ("Moths", "# Moths\n\nMoths fly at night.")

    output = await build(provider="jina", base_url=jina.base_url).ainvoke({"url": page})

    assert (
        output == f"Title: Moths\n\nURL Source: {page}\n\nMarkdown Content:\n# Moths\n\nMoths fly at night."
    )
    (request,) = await jina.wait_for("read")
    assert request == {"url": page, "bearer": None}, "no key configured: none sent"


async def test_jina_gets_the_key_and_its_answer_is_capped() -> None:
    async with FakeJina(api_key="jina-test") as jina:
        jina.pages["https://example.com/long"] = ("Long", "moth " * 3000)
        tool = build(provider="jina", base_url=jina.base_url, api_key="jina-test", max_chars=500)

        output = await tool.ainvoke({"url": "https://example.com/long"})

        assert output.startswith("Title: Long")
        assert "[... cut: showing the first" in output
        (request,) = await jina.wait_for("read")
        assert request["bearer"] == "jina-test"


async def test_jina_failing_to_read_a_page_passes_its_reason_on(jina: FakeJina) -> None:
    output = await build(provider="jina", base_url=jina.base_url).ainvoke({"url": "https://nowhere.invalid/"})
    assert output.startswith("Error: Jina Reader answered HTTP 422: Failed to goto https://nowhere.invalid/")


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://169.254.169.254/latest/meta-data/", id="metadata"),
        pytest.param("http://[64:ff9b::a9fe:a9fe]/latest/meta-data/", id="nat64-metadata"),
        pytest.param("http://[::ffff:10.0.0.1]/admin", id="ipv4-mapped-private"),
        pytest.param("http://localhost:8080/", id="localhost"),
    ],
)
async def test_a_reader_service_is_never_sent_a_private_or_metadata_address(jina: FakeJina, url: str) -> None:
    output = await build(provider="jina", base_url=jina.base_url).ainvoke({"url": url})
    assert output.startswith(f"Error: will not fetch {url}: ")
    assert "private or local address" in output
    assert jina.calls == [], "nothing was sent to the reader"


# ------------------------------------------------------------------ Firecrawl


async def test_firecrawl_returns_the_page_markdown_under_its_title(firecrawl: FakeFirecrawl) -> None:
    firecrawl.pages["https://example.com/moths"] = ("Moths of Europe", "## Luna moth\n\nPale green.")
    tool = build(provider="firecrawl", base_url=firecrawl.base_url, api_key="fc-test")

    output = await tool.ainvoke({"url": "https://example.com/moths"})

    assert output == "# Moths of Europe\n\n## Luna moth\n\nPale green."
    (request,) = await firecrawl.wait_for("scrape")
    assert request["url"] == "https://example.com/moths"
    assert request["formats"] == ["markdown"]
    assert request["bearer"] == "fc-test"


async def test_firecrawl_failing_to_scrape_passes_its_reason_on(firecrawl: FakeFirecrawl) -> None:
    tool = build(provider="firecrawl", base_url=firecrawl.base_url, api_key="fc-test")
    output = await tool.ainvoke({"url": "https://example.com/gone"})
    assert output.startswith("Error: Firecrawl answered HTTP 500: All scraping engines failed!")


async def test_firecrawl_without_a_key_says_where_to_put_one() -> None:
    output = await build(provider="firecrawl").ainvoke({"url": "https://example.com/"})
    assert output.startswith("Error: the tool is not set up for Firecrawl: no API key")
    assert "$FIRECRAWL_API_KEY" in output


@pytest.mark.parametrize(
    ("trouble", "expected"),
    [
        pytest.param({"fail_with": 503}, "answered HTTP 503", id="http-503"),
        pytest.param({"hang": True}, "did not answer within 0.5s", id="timeout"),
    ],
)
@pytest.mark.parametrize("provider", ["jina", "firecrawl"])
async def test_a_failing_reader_gives_an_error_line(
    provider: str, trouble: dict[str, Any], expected: str
) -> None:
    fake = FakeJina() if provider == "jina" else FakeFirecrawl(api_key="fc-test")
    async with fake:
        for attribute, value in trouble.items():
            setattr(fake, attribute, value)
        timeout = 0.5 if "hang" in trouble else 10.0  # only the hanging reader needs the short one
        tool = build(provider=provider, base_url=fake.base_url, api_key="fc-test", timeout_seconds=timeout)
        output = await tool.ainvoke({"url": "https://example.com/"})
    assert output.startswith("Error: ")
    assert expected in output


# ------------------------------------------------------------------ DNS rebinding

# Runs in a network namespace of its own (`unshare -rn`): only its loopback exists, and it also holds
# a public address, so both the "public" server and the loopback one are local and nothing can
# leave the host. The event loop's resolver answers `rebind.test` with the public address the first
# time and 127.0.0.1 every time after (a DNS rebinding attack); IP literals resolve as usual.
REBIND_PROBE = r"""
import asyncio, json, socket, subprocess, sys
from agents.tools.community import _direct

PUBLIC = "93.184.216.34"
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "addr", "add", f"{PUBLIC}/32", "dev", "lo"], check=True)
seen = {"public": [], "loopback": [], "lookups": 0}


class RebindingLoop(asyncio.SelectorEventLoop):
    async def getaddrinfo(self, host, port, *args, **kwargs):
        if (host.decode() if isinstance(host, bytes) else host) != "rebind.test":  # anyio sends bytes
            return await super().getaddrinfo(host, port, *args, **kwargs)
        seen["lookups"] += 1
        address = PUBLIC if seen["lookups"] == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]


def server(name, body):
    async def answer(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        seen[name].append(head.decode().split("\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n"
                     b"connection: close\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()
    return answer


async def main():
    public = await asyncio.start_server(server("public", b"the public page"), PUBLIC, 0)
    port = public.sockets[0].getsockname()[1]
    loopback = await asyncio.start_server(server("loopback", b"internal secret"), "127.0.0.1", port)
    async with public, loopback:
        try:
            page = await _direct.fetch(f"http://rebind.test:{port}/", timeout_seconds=10,
                                       max_bytes=10_000, allow_private_networks=False)
            outcome = page.body.decode()
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"outcome": outcome, **seen}))


loop = RebindingLoop()
loop.run_until_complete(main())
"""


def test_a_name_rebinding_to_loopback_after_the_check_cannot_reach_loopback() -> None:
    usable = shutil.which("ip") and shutil.which("unshare")
    if not usable or subprocess.run(["unshare", "-rn", "true"], capture_output=True, check=False).returncode:
        pytest.skip("needs `unshare -rn` and `ip` (a private network namespace keeps it off the network)")
    done = subprocess.run(
        ["unshare", "-rn", sys.executable, "-c", REBIND_PROBE],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["loopback"] == [], "the connection went to the address the check never saw"
    assert seen["outcome"] == "the public page"
    assert seen["lookups"] == 1, "one resolution, for the check and the connection"
    [request] = seen["public"]
    assert any(line.lower().startswith("host: rebind.test:") for line in request), "the URL's Host header"


# ------------------------------------------------------------------ the run's egress policy


def egress(mode: str, **more: Any) -> EgressPolicy:
    """A run's policy as `access.egress` makes it; names pinned to the loopback site (no DNS)."""
    return EgressPolicy(mode=mode, hosts={"docs.allowed.test": "127.0.0.1", "evil.test": "127.0.0.1"}, **more)


async def test_the_runs_egress_policy_decides_which_hosts_web_fetch_reads_redirects_included(
    site: FakeWebsite,
) -> None:
    site.page("/page", "an allowed page", "text/plain")
    site.redirect("/hop", f"http://evil.test:{site.port}/steal")
    settings = WebFetchSettings()  # as shipped: public hosts only; the pinned names are the operator's
    allowlist = egress("allowlist", allow=["allowed.test"])
    allowed = f"http://docs.allowed.test:{site.port}"

    assert await read_page(settings, f"{allowed}/page", allowlist) == "an allowed page"
    with pytest.raises(FetchRefused, match=r"evil\.test is not on the egress allowlist"):
        await read_page(settings, f"{allowed}/hop", allowlist)
    with pytest.raises(FetchRefused, match="not on the egress allowlist"):
        await read_page(settings, f"http://evil.test:{site.port}/steal", allowlist)
    with pytest.raises(FetchRefused, match="allows no network access"):
        await read_page(settings, f"{allowed}/page", egress("none"))
    asked = [params["path"] for method, params in site.calls if method == "get"]
    assert asked == ["/page", "/hop"], "the attacker's page was never asked for"
    unset = egress("none", binds_web=False)  # no `egress` configured: web_fetch as before
    with pytest.raises(FetchRefused, match="private or local address"):
        await read_page(settings, f"http://127.0.0.1:{site.port}/page", unset)


async def test_a_reader_provider_is_asked_only_when_the_policy_allows_its_host_too(site: FakeWebsite) -> None:
    async with FakeJina() as jina:
        page = f"http://docs.allowed.test:{site.port}/page"
        jina.pages[page] = ("Moths", "Moths fly at night.")
        pinned = {"docs.allowed.test": "127.0.0.1", "reader.allowed.test": "127.0.0.1"}
        listed = EgressPolicy(mode="allowlist", allow=["allowed.test"], hosts=pinned)
        settings = WebFetchSettings(provider="jina", base_url=f"http://reader.allowed.test:{jina.port}")
        assert "Moths fly at night." in await read_page(settings, page, listed)

        unlisted = WebFetchSettings(provider="jina", base_url=f"http://reader.other.test:{jina.port}")
        with pytest.raises(EgressRefused, match=r"reader\.other\.test is not on the egress allowlist"):
            await read_page(unlisted, page, egress("allowlist", allow=["allowed.test"]))
        assert len(jina.calls) == 1, "the reader never heard of the page under the unlisted name"
