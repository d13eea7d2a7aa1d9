"""DuckDuckGo as the `ddgs` library reaches it, on 127.0.0.1: a CONNECT proxy in front of a TLS fake.

ddgs asks the real hosts (`https://html.duckduckgo.com/html/`, `https://duckduckgo.com`,
`https://duckduckgo.com/i.js`) with its own HTTP client; the tool passes it a
`proxy` and a `ca_file`, as an operator behind a TLS-inspecting proxy would. Here
the proxy is `FakeDuckDuckGo.proxy_url`: it records each `CONNECT host:443` and
tunnels DuckDuckGo's hosts (and only them: any other is refused) to a local
HTTPS server whose certificate, for those names, is signed by a throwaway CA
(`ca_file`). That server answers in DuckDuckGo's wire format: the HTML results
page, the search page carrying the `vqd` token, and the images JSON.
So ddgs runs unchanged, and nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import html
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from tests.fakes._server import LocalServer

HOSTS = ("duckduckgo.com", "html.duckduckgo.com")
VQD = "4-271828182845904523536028747135266249775"


@dataclass
class Page:
    title: str
    url: str
    snippet: str


@dataclass
class Picture:
    title: str
    image: str
    thumbnail: str
    url: str


def _certificates(folder: Path, hosts: tuple[str, ...] = HOSTS) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate it signed for `hosts` (DuckDuckGo's by default): (ca.pem,
    cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Antler test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(h) for h in hosts] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca_file, cert_file, key_file


class FakeDuckDuckGo(LocalServer):
    """`async with FakeDuckDuckGo(tmp_path) as ddg:`; set `pages` / `pictures`; read `connects`, `calls`."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.ca_file, self._cert, self._key = _certificates(folder)
        self.pages: list[Page] = []
        self.pictures: list[Picture] = []
        self.connects: list[str] = []  # CONNECT targets the proxy was asked for, allowed or not
        self._proxy: asyncio.Server | None = None
        self.proxy_port = 0
        app = FastAPI()
        app.post("/html/")(self._html_search)
        app.get("/")(self._search_page)
        app.get("/i.js")(self._images)
        self.app = app

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.proxy_port}"

    # -------------------------------------------------------------- DuckDuckGo's endpoints

    async def _html_search(self, request: Request) -> Response:
        form = dict(await request.form())
        self.record("html", {"host": request.headers.get("host"), **form})
        blocks = []
        for page in self.pages:
            url, title, snippet = html.escape(page.url), html.escape(page.title), html.escape(page.snippet)
            blocks.append(
                '<div class="result results_links results_links_deep web-result">'
                '<div class="links_main links_deep result__body">'
                f'<h2 class="result__title"><a rel="nofollow" class="result__a" href="{url}">{title}</a></h2>'
                f'<a class="result__snippet" href="{url}">{snippet}</a>'
                "</div></div>"
            )
        if not blocks:
            blocks.append('<div class="no-results">No results.</div>')
        body = "<html><head><title>DuckDuckGo</title></head><body><div id='links'>" + "".join(blocks)
        return HTMLResponse(body + "</div></body></html>")

    async def _search_page(self, request: Request) -> Response:
        self.record("page", {"host": request.headers.get("host"), **dict(request.query_params)})
        return HTMLResponse(f'<html><head><script>vqd="{VQD}";</script></head><body></body></html>')

    async def _images(self, request: Request) -> Response:
        params = dict(request.query_params)
        self.record("images", {"host": request.headers.get("host"), **params})
        if params.get("vqd") != VQD:
            return JSONResponse({"error": "bad vqd"}, 403)
        results = [
            {
                "title": p.title,
                "image": p.image,
                "thumbnail": p.thumbnail,
                "url": p.url,
                "height": 600,
                "width": 800,
                "source": "Bing",
            }
            for p in self.pictures
        ]
        return JSONResponse({"results": results, "next": None, "vqd": {params.get("q", ""): VQD}})

    # -------------------------------------------------------------- serving: TLS server and proxy

    async def __aenter__(self) -> FakeDuckDuckGo:
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            ssl_certfile=str(self._cert),
            ssl_keyfile=str(self._key),
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:  # noqa: ASYNC110 - uvicorn offers no event for this
            await asyncio.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        self._proxy = await asyncio.start_server(self._tunnel, "127.0.0.1", 0)
        self.proxy_port = self._proxy.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._proxy is not None
        self._proxy.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._proxy.wait_closed(), 2)
        await super().__aexit__(*exc)

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.decode("latin-1").split("\r\n", 1)[0].split(" ", 2)
            self.connects.append(f"{method} {target}")
            host = target.rsplit(":", 1)[0]
            if method != "CONNECT" or host not in HOSTS:
                writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
                return
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.port)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(
                _pipe(reader, upstream_writer), _pipe(upstream_reader, writer), return_exceptions=True
            )
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> Any:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    finally:
        with contextlib.suppress(Exception):
            sink.close()
