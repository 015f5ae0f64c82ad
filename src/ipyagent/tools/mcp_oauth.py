"""Sign-in to a remote MCP server with OAuth (MCP specification 2025-11-25, "Authorization"),
through the `mcp` SDK's OAuth client (`mcp.client.auth.OAuthClientProvider`): protected
resource and authorization server metadata discovery, dynamic client registration, the
authorization code grant with PKCE, and refresh.

ipyagent adds what the SDK leaves to its client:

- `TokenFile`: the tokens and the registered client, in a file of mode 0600 in a folder of
  mode 0700 outside the notebook (``$IPYAGENT_MCP_TOKENS``, else ``~/.config/ipyagent/mcp-oauth``),
  one per server URL. Every token read or written is given to the one redactor (`core.add_secret`),
  so none reaches a notebook, a transcript, a log or the run store.
- `RedirectListener`: the redirect URI, ``http://127.0.0.1:PORT/callback`` (a loopback
  redirect, RFC 8252), listened on only while a sign-in waits; its port is kept with the
  registration, since the authorization server checks it.
- The link to open, handed to `show` (the notebook prints it in the cell).

Nothing here imports the SDK at module level.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .. import __version__
from ..core import add_secret

#: Seconds a sign-in waits for the browser to come back to the redirect URI.
SIGN_IN_TIMEOUT = 300.0
#: Environment variable naming the folder of the token files.
TOKENS_ENV = "IPYAGENT_MCP_TOKENS"


def tokens_dir() -> Path:
    """The folder of the token files (created with mode 0700): ``$IPYAGENT_MCP_TOKENS``, else
    ``$XDG_CONFIG_HOME/ipyagent/mcp-oauth`` (``~/.config/...``)."""
    given = os.environ.get(TOKENS_ENV)
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    base = Path(given) if given else config / "ipyagent" / "mcp-oauth"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    return base


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _can_bind(port: int) -> bool:
    """Whether the listener can take `port` (as asyncio's server binds: a port in TIME_WAIT is free)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class TokenFile:
    """One server's OAuth state in a 0600 JSON file (the SDK's `TokenStorage`): ``tokens``,
    ``expires_at`` (epoch seconds, None: not said), ``client_info`` (the registration) and
    ``redirect_port``.

    Args:
        url: the MCP server's URL (the file's key: a hash of it names the file).
        folder: where the file lives (default `tokens_dir()`).
    """

    def __init__(self, url: str, folder: Path | None = None) -> None:
        self.url = url
        self.path = (folder or tokens_dir()) / f"{hashlib.sha256(url.encode()).hexdigest()[:24]}.json"
        self.data: dict[str, Any] = self._read()
        for secret in self._secrets():
            add_secret(secret)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("url") == self.url else {}

    def _secrets(self) -> list[str]:
        tokens, client = self.data.get("tokens") or {}, self.data.get("client_info") or {}
        values = [tokens.get("access_token"), tokens.get("refresh_token"), client.get("client_secret")]
        return [v for v in values if isinstance(v, str) and v]

    def _write(self) -> None:
        for secret in self._secrets():
            add_secret(secret)
        temporary = self.path.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**self.data, "url": self.url}, f)
        os.chmod(temporary, 0o600)
        os.replace(temporary, self.path)

    @property
    def expires_at(self) -> float | None:
        value = self.data.get("expires_at")
        return float(value) if isinstance(value, (int, float)) else None

    def redirect_port(self) -> int:
        """The redirect URI's port: the registered one when it is free, else a new one (and the
        registration is dropped, so the client registers again with it)."""
        port = self.data.get("redirect_port")
        if not isinstance(port, int) or not _can_bind(port):
            self.data.pop("client_info", None)
            self.data["redirect_port"] = port = _free_port()
            self._write()
        return port

    async def get_tokens(self) -> Any:
        from mcp.shared.auth import OAuthToken

        tokens = self.data.get("tokens")
        return OAuthToken.model_validate(tokens) if tokens else None

    async def set_tokens(self, tokens: Any) -> None:
        self.data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        self.data["expires_at"] = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self._write()

    async def get_client_info(self) -> Any:
        from mcp.shared.auth import OAuthClientInformationFull

        client = self.data.get("client_info")
        return OAuthClientInformationFull.model_validate(client) if client else None

    async def set_client_info(self, client_info: Any) -> None:
        self.data["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write()

    def forget(self) -> None:
        """Sign out: the tokens and the registration are deleted."""
        self.data = {}
        self.path.unlink(missing_ok=True)


class RedirectListener:
    """The loopback redirect URI of one sign-in: `start` listens on ``127.0.0.1:port``, `result`
    waits for the authorization server's redirect (``/callback?code=...&state=...``)."""

    def __init__(self, port: int, timeout: float = SIGN_IN_TIMEOUT) -> None:
        self.port, self.timeout = port, timeout
        self._server: asyncio.Server | None = None
        self._answer: asyncio.Future[dict[str, str]] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    async def start(self) -> None:
        self._answer = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1")
            target = line.split(" ")[1] if line.count(" ") >= 2 else ""
            query = {k: v[0] for k, v in parse_qs(urlsplit(target).query).items()}
            found = urlsplit(target).path == "/callback" and ("code" in query or "error" in query)
            body = (b"Signed in: you can close this tab and go back to the notebook." if "code" in query
                    else b"The sign-in did not complete; see the notebook.") if found else b"Not found."
            status = b"200 OK" if found else b"404 Not Found"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
            if found and self._answer is not None and not self._answer.done():
                self._answer.set_result(query)
        except (asyncio.TimeoutError, OSError):
            pass
        finally:
            writer.close()

    async def result(self) -> Any:
        """The redirect's code, state and issuer (the SDK's `AuthorizationCodeResult`).

        Raises:
            OAuthFlowError: no redirect within `timeout` seconds, or the server sent an error.
        """
        from mcp.client.auth import OAuthFlowError
        from mcp.shared.auth import AuthorizationCodeResult

        assert self._answer is not None, "start() first"
        try:
            query = await asyncio.wait_for(self._answer, self.timeout)
        except asyncio.TimeoutError:
            raise OAuthFlowError(f"no sign-in within {self.timeout:g} s") from None
        finally:
            self.close()
        if "code" not in query:
            why = query.get("error_description") or query.get("error") or "no code"
            raise OAuthFlowError(f"the authorization server refused: {why}")
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None


def oauth_provider(url: str, show: Callable[[str], None], *, scope: str | None = None,
                   timeout: float = SIGN_IN_TIMEOUT, storage: TokenFile | None = None) -> Any:
    """The SDK's `OAuthClientProvider` (an ``httpx2.Auth``) for the MCP server at `url`: its
    tokens in a `TokenFile`; a sign-in shows the authorization link with `show(link)` and waits
    up to `timeout` seconds for the redirect to ``127.0.0.1``. A stored token that expired is
    refreshed before it is sent (`TokenFile.expires_at`)."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    storage = storage or TokenFile(url)
    listener = RedirectListener(storage.redirect_port(), timeout)
    metadata = OAuthClientMetadata(
        client_name="ipyagent", software_id="ipyagent", software_version=__version__, redirect_uris=[listener.uri],
        grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        token_endpoint_auth_method="none", scope=scope)

    async def redirect(link: str) -> None:
        await listener.start()
        show(link)

    class Provider(OAuthClientProvider):  # type: ignore[misc]
        async def _initialize(self) -> None:  # the SDK keeps no expiry across processes: the file does
            await super()._initialize()
            expires = storage.expires_at
            self.context.token_expiry_time = max(expires, 1.0) if expires is not None else None  # 0: no expiry

    return Provider(url, metadata, storage, redirect_handler=redirect, callback_handler=listener.result)
