"""An OAuth-protected MCP server for the tests, built with the SDK's auth helpers: its own
authorization server (metadata, dynamic client registration, an authorize endpoint that approves
at once and redirects back with a code, the token endpoint with PKCE and refresh) in front of a
streamable-HTTP MCP server with one tool. Served by uvicorn on 127.0.0.1 in a thread, stopped at
the end of the `oauth_server` context.

`Issued` records what the authorization server did (registrations, grants, the tokens issued), so
a test can look for every token where it must not be.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from .waiting import wait_until


@dataclass
class Issued:
    """What the authorization server did: `clients` registered, `grants` by type, `tokens` issued."""

    clients: list[str] = field(default_factory=list)
    grants: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # the bearer token of each MCP request


class Provider:
    """An in-memory `OAuthAuthorizationServerProvider` that approves every authorization."""

    def __init__(self, issued: Issued, expires_in: int = 3600) -> None:
        self.issued, self.expires_in = issued, expires_in
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info
        self.issued.clients.append(client_info.client_id)

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [], expires_at=time.time() + 300, client_id=client.client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    def _tokens(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = f"at-{secrets.token_hex(16)}", f"rt-{secrets.token_hex(16)}"
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + self.expires_in, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        self.issued.tokens += [access, refresh]
        return OAuthToken(access_token=access, expires_in=self.expires_in, refresh_token=refresh,
                          scope=" ".join(scopes) or None)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(code.code, None)
        self.issued.grants.append("authorization_code")
        return self._tokens(client.client_id, code.scopes, code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.issued.grants.append("refresh_token")
        return self._tokens(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        self.issued.calls.append(token)
        return self.access.get(token)

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def oauth_server(expires_in: int = 3600) -> Iterator[tuple[str, Issued]]:
    """Serve the protected MCP server; yields (its ``/mcp`` URL, what its authorization server issued)."""
    import uvicorn

    issued = Issued()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = MCPServer("oauth-test", auth_server_provider=Provider(issued, expires_in), auth=AuthSettings(
        issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False,
        client_registration_options=ClientRegistrationOptions(enabled=True)))

    @server.tool()
    def whoami() -> str:
        """Says who is signed in."""
        return "signed in to the protected server"

    web = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port,
                                        log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(web.serve()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: web.started or not thread.is_alive(), 30)
        if not web.started:
            raise RuntimeError("the OAuth test server did not start")
        yield f"{base}/mcp", issued
    finally:
        web.should_exit = True
        thread.join(10)
