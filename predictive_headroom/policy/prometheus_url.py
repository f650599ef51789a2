"""A Prometheus URL, checked without loading the settings library: its form, and the credentials a
plain http:// URL would send in the clear (for the daemon's settings and `validate --values`)."""

from __future__ import annotations

from urllib.parse import urlsplit


def check_prometheus_url(url: str) -> str:
    """Return `url` when it is an http(s) URL with a host; raise ValueError saying how to write it."""
    parts = urlsplit(url.strip())
    if not parts.scheme or "://" not in url:
        raise ValueError(
            f"Prometheus URL {url!r} has no scheme; write it with http:// or https://, "
            f"e.g. http://{url.strip().lstrip('/') or 'prometheus:9090'}"
        )
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"Prometheus URL {url!r} uses {parts.scheme}://; use http:// or https://")
    if not parts.hostname:
        raise ValueError(f"Prometheus URL {url!r} has no host, e.g. http://prometheus:9090")
    return url


def cut_userinfo(url: str) -> str:
    """`url` without the user and password it may carry (for messages)."""
    parts = urlsplit(url.strip())
    if not (parts.username or parts.password):
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def sent_in_the_clear(
    url: str, *, token_file: bool, basic: bool, headers: dict[str, str]
) -> list[str]:
    """The credentials a request to `url` would carry readable by anyone on the path: none for
    https; for a plain http:// URL, a bearer token, a password (basic auth, or user:password@ in
    the URL) or an Authorization header, each named."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() != "http":
        return []
    given = (
        ("a bearer token", token_file),
        ("a password", basic),
        ("the URL's user and password", bool(parts.username or parts.password)),
        ("an Authorization header", any(k.lower() == "authorization" for k in headers)),
    )
    return [what for what, present in given if present]


def clear_text_refusal(url: str, sent: list[str], *, ca: str, allow: str) -> str:
    """Why `sent` is not sent to the plain http:// `url`, and the two ways on: https (with `ca`
    for a private CA), or `allow`, the setting that says the path is trusted."""
    return (
        f"Prometheus URL {cut_userinfo(url)!r} is plain http:// and {' and '.join(sent)} would "
        f"cross the network readable by anyone on the path: use an https:// URL ({ca} for a "
        f"private CA), or set {allow} to send it anyway"
    )
