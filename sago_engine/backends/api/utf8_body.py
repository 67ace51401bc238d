"""An HTTP body that is not UTF-8 is still a reply: ``Utf8Body`` repairs it before an SDK parses it.

The SDKs (openai, anthropic, google-genai) decode a JSON body strictly; a server that sends one
invalid byte in a reply's text makes the SDK raise ``UnicodeDecodeError`` and the billed reply is
lost. ``Utf8Body`` wraps the httpx transport of an API client: a body that does not decode as UTF-8
is decoded with U+FFFD for each bad sequence and re-encoded, and the thread that sent the request
is told (``took_invalid_utf8``), so ``ApiBackend`` flags the reply ``invalid_utf8``
(``replytext.REPLY_FLAGS``). The SDKs call their sync transport in the calling thread, so a
thread-local flag belongs to that request.
"""

from __future__ import annotations

import threading

import httpx2 as httpx

__all__ = ["Utf8Body", "http_client", "took_invalid_utf8"]

_seen = threading.local()

#: Headers that describe the body as it came off the wire (it is re-sent decoded and re-encoded).
_WIRE_HEADERS = ("content-encoding", "content-length", "transfer-encoding")


class Utf8Body(httpx.BaseTransport):
    """An httpx transport whose response bodies always decode as UTF-8 (see the module doc)."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self._inner = inner if inner is not None else httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = self._inner.handle_request(request)
        try:
            body = resp.read()
        finally:
            resp.close()
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            body = body.decode("utf-8", errors="replace").encode("utf-8")
            _seen.invalid = True
        headers = [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in _WIRE_HEADERS]
        return httpx.Response(resp.status_code, headers=headers, content=body, request=request,
                              extensions=resp.extensions)

    def close(self) -> None:
        self._inner.close()


def http_client(**kw) -> httpx.Client:
    """An ``httpx.Client`` with the ``Utf8Body`` transport (``kw`` as ``httpx.Client``'s)."""
    return httpx.Client(transport=Utf8Body(), **kw)


def took_invalid_utf8() -> bool:
    """Whether a body received by this thread since the last call was repaired (then resets)."""
    seen = bool(getattr(_seen, "invalid", False))
    _seen.invalid = False
    return seen
