"""The workbench page's own GETs: `/` and its static assets, with strict headers.

`evidence serve` calls `page_response` for every GET or HEAD outside `/v1`; None means "not
the page's" and the request goes on to the API resolver (which answers its 404 envelope).
Every URL the page uses is relative, so it works under a path prefix such as API Gateway's
stage (`/prod/`) as long as the page's own URL ends in `/`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

STATIC = Path(__file__).parent / "static"

#: Scripts and styles only from the page's own origin: no inline script, no eval, nothing from
#: elsewhere; the page cannot be framed, and fetches go to the API on the same origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
#: URL path → file of STATIC. A fixed map: no path from the request ever reaches the filesystem.
_ROUTES = {
    "/": "index.html",
    "/index.html": "index.html",
    "/static/app.js": "app.js",
    "/static/app.css": "app.css",
}

Page = tuple[int, dict[str, str], bytes]


@lru_cache(maxsize=len(_ROUTES))
def _asset(name: str) -> bytes:
    return (STATIC / name).read_bytes()


def page_response(path: str) -> Page | None:
    """(status, headers, body) for one of the page's paths (query string already removed)."""
    name = _ROUTES.get(path)
    if name is None:
        return None
    body = _asset(name)
    headers = {"Content-Type": _TYPES[Path(name).suffix], **SECURITY_HEADERS}
    return 200, headers, body


def serve_page(method: str, path: str) -> Page | None:
    """`evidence serve`'s pages hook (`make_server(pages=...)`): GET and HEAD outside /v1/."""
    return page_response(path)
