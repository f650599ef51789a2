"""The chart's security settings a values file can get wrong, checked as the render checks them.

`security_problems` refuses what the chart refuses to render (a bearer token over plain http://
without `prometheus.insecure`, a ServiceMonitor token Secret neither made nor named, pod reads with
no namespaces named and no explicit cluster-wide choice); `security_findings` warns about what renders but is weaker than it should be (the daemon
image pulled by tag alone). docs/security.md lists each default and how to change it.
"""

from __future__ import annotations

from typing import Any

from predictive_headroom.policy.lint import Finding
from predictive_headroom.policy.load import Problem, _format_path, _nearest_line
from predictive_headroom.policy.settings import plain_http_credentials

CHART_PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"
"""values.yaml's prometheus.url, what a values file that names none gets."""
DIGEST_COMMAND = "docker inspect --format '{{index .RepoDigests 0}}' IMAGE:TAG"
"""After `docker push`, prints repository@digest (the README's build step makes it a values line)."""


def _section(values: dict[str, Any], key: str) -> dict[str, Any]:
    node = values.get(key)
    return node if isinstance(node, dict) else {}


def security_problems(values: dict[str, Any], index: dict[tuple[Any, ...], int]) -> list[Problem]:
    """Every security setting of `values` the chart would refuse to render, where it is written."""
    problems = []
    prometheus = _section(values, "prometheus")
    token = prometheus.get("bearerToken")
    url = prometheus.get("url")
    if isinstance(token, dict) and token.get("enabled") is True:
        refused = plain_http_credentials(
            url if isinstance(url, str) else CHART_PROMETHEUS_URL,
            token_file=True,
            basic=False,
            headers={},
            insecure=prometheus.get("insecure") is True,
        )
        if refused:
            loc = ("prometheus", "url") if isinstance(url, str) else ("prometheus", "bearerToken")
            message = refused.replace("PH_PROMETHEUS_CA_FILE", "prometheus.tls.ca").replace(
                "PH_PROMETHEUS_INSECURE=true (the chart's prometheus.insecure)",
                "prometheus.insecure: true",
            )
            problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
    token = _section(_section(values, "serviceMonitor"), "token")
    if token.get("create") is False and not token.get("secretName"):
        loc = ("serviceMonitor", "token", "create")
        message = (
            "with create: false, name the Secret (in the release namespace) holding the token "
            "Prometheus presents in serviceMonitor.token.secretName, and bind its holder with "
            "httpAuth.readers; or leave create: true for a ServiceAccount that may only get /metrics"
        )
        problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
    disruption = _section(values, "disruption")
    if (
        disruption.get("readPods") is True
        and not disruption.get("readPodsNamespaces")
        and disruption.get("readPodsClusterWide") is not True
    ):
        loc = ("disruption", "readPods")
        message = (
            "with readPods: true, list the namespaces whose pods the daemon may read in "
            "disruption.readPodsNamespaces (a Role in each, e.g. [web, batch]); to read every "
            "namespace's pods (a ClusterRole: every pod spec, env values included) set "
            "disruption.readPodsClusterWide: true"
        )
        problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
    return problems


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
