"""The chart's security settings a values file can get wrong, checked as the render checks them.

`security_problems` refuses what the chart refuses to render (a bearer token over plain http://
without `prometheus.insecure`, a ServiceMonitor token Secret neither made nor named, pod reads
with no namespaces named and no explicit cluster-wide choice); `security_findings` warns about
what renders but is weaker than it should be (an image pulled by tag alone). docs/security.md
lists each default and how to change it.
"""

from __future__ import annotations

from typing import Any

from predictive_headroom.policy.lint import Finding
from predictive_headroom.policy.load import Problem, _format_path, _nearest_line
from predictive_headroom.policy.settings import clear_text_refusal, sent_in_the_clear

CHART_PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"
"""values.yaml's prometheus.url, what a values file that names none gets."""
DIGEST_COMMAND = "docker inspect --format '{{index .RepoDigests 0}}' IMAGE:TAG"
"""After `docker push`, prints repository@digest (the README's build step makes it a values line)."""


def _section(values: dict[str, Any], key: str) -> dict[str, Any]:
    node = values.get(key)
    return node if isinstance(node, dict) else {}


def security_problems(values: dict[str, Any], index: dict[tuple[Any, ...], int]) -> list[Problem]:
    """Every security setting of `values` the chart would refuse to render, where it is written."""
    found = (_clear_text(values), _scrape_token(values), _pod_reads(values))
    return [
        Problem(_format_path(loc), message, _nearest_line(index, loc))
        for loc, message in (f for f in found if f is not None)
    ]


Found = tuple[tuple[str, ...], str] | None
"""A problem's field path and message, or None."""


def _clear_text(values: dict[str, Any]) -> Found:
    """A bearer token for a plain http:// Prometheus URL (the chart's default URL is one)."""
    prometheus = _section(values, "prometheus")
    url = prometheus.get("url")
    if _section(prometheus, "bearerToken").get("enabled") is not True:
        return None
    if prometheus.get("insecure") is True:
        return None
    given = url if isinstance(url, str) else CHART_PROMETHEUS_URL
    sent = sent_in_the_clear(given, token_file=True, basic=False, headers={})
    if not sent:
        return None
    loc = ("prometheus", "url") if isinstance(url, str) else ("prometheus", "bearerToken")
    return loc, clear_text_refusal(
        given, sent, ca="prometheus.tls.ca", allow="prometheus.insecure: true"
    )


def _scrape_token(values: dict[str, Any]) -> Found:
    """A ServiceMonitor token neither made by the chart nor named."""
    token = _section(_section(values, "serviceMonitor"), "token")
    if token.get("create") is not False or token.get("secretName"):
        return None
    return ("serviceMonitor", "token", "create"), (
        "with create: false, name the Secret (in the release namespace) holding the token "
        "Prometheus presents in serviceMonitor.token.secretName, and bind its holder with "
        "httpAuth.readers; or leave create: true for a ServiceAccount that may only read the daemon's endpoints"
    )


def _pod_reads(values: dict[str, Any]) -> Found:
    """Pod reads with no namespaces named and no explicit cluster-wide choice."""
    disruption = _section(values, "disruption")
    if (
        disruption.get("readPods") is not True
        or disruption.get("readPodsNamespaces")
        or disruption.get("readPodsClusterWide") is True
    ):
        return None
    return ("disruption", "readPods"), (
        "with readPods: true, list the namespaces whose pods the daemon may read in "
        "disruption.readPodsNamespaces (a Role in each, e.g. [web, batch]); to read every "
        "namespace's pods (a ClusterRole: every pod spec, env values included) set "
        "disruption.readPodsClusterWide: true"
    )


def security_findings(values: dict[str, Any]) -> list[Finding]:
    """Warnings for a values file that renders but pulls an image by tag alone: the daemon's
    (`image.digest` empty, the chart's default: the user builds the image) or the pause image's
    (its digest emptied)."""
    findings = []
    if not _section(values, "image").get("digest"):
        findings.append(
            Finding(
                "image.digest",
                "empty: the daemon image is pulled by tag, which a push can move; after `docker "
                f"push`, `{DIGEST_COMMAND}` prints repository@digest (README, Install: the "
                "command that prints the values line)",
            )
        )
    pause = _section(_section(values, "placeholder"), "image")
    if "digest" in pause and not pause["digest"]:
        findings.append(
            Finding(
                "placeholder.image.digest",
                "empty: the pause image is pulled by tag alone; leave it out for the chart's "
                "pinned digest, or give your mirror's (`crane digest <image>`)",
            )
        )
    return findings
