"""Runtime settings of the daemon, read from environment variables with the prefix `PH_`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from predictive_headroom.policy.prometheus_url import (  # noqa: F401 (re-exported)
    check_prometheus_url,
    clear_text_refusal,
    cut_userinfo,
    sent_in_the_clear,
)


class Settings(BaseSettings):
    """Runtime settings from environment variables with the prefix `PH_` (e.g. `PH_PROMETHEUS_URL`)."""

    model_config = SettingsConfigDict(env_prefix="PH_", extra="ignore")

    prometheus_url: str | None = None
    prometheus_bearer_token_file: Path | None = None
    prometheus_username: str | None = None
    prometheus_password: SecretStr | None = None
    prometheus_headers: dict[str, str] = Field(default_factory=dict)
    prometheus_ca_file: Path | None = None
    prometheus_verify_tls: bool = True
    prometheus_insecure: bool = False
    """Send credentials to a plain http:// Prometheus URL (refused otherwise, see
    `plain_http_credentials`)."""
    prometheus_timeout: float = Field(default=30.0, gt=0)
    prometheus_retries: int = Field(default=3, ge=0)
    fresh_read_timeout: float = Field(default=5.0, gt=0)
    """Seconds the reconcile waits for the latest observations (one attempt, no retries; connect,
    headers and body together) before the burst table stands in; PH_PROMETHEUS_TIMEOUT is for the
    refit's history (per attempt)."""
    prometheus_max_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    """Largest Prometheus answer read (bytes); a larger one is refused with an error."""
    namespace: str = "predictive-headroom"
    dry_run: bool = False
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    listen_host: str = "0.0.0.0"
    listen_port: int = Field(default=8443, ge=0, le=65535)
    """The main port: /metrics, /report*, /last-run (and the probes); 0 picks a free one."""
    probe_port: int | None = Field(default=None, ge=0, le=65535)
    """The probes' own port (/healthz, /readyz: plain HTTP, open); default 8081, or a free one
    when `listen_port` is 0."""
    http_auth: bool = True
    """Serve the main port over TLS to callers the API server authenticates and authorises
    (TokenReview, SubjectAccessReview); `PH_HTTP_AUTH=off` serves it plainly to anyone."""
    tls_cert_file: Path | None = None
    """A mounted certificate (PEM) for the main port; unset: a self-signed one made at start."""
    tls_key_file: Path | None = None
    """The key of `tls_cert_file` (unset: read from the certificate file)."""
    reconcile_interval: float = Field(default=60.0, gt=0)
    reconcile_deadline: float | None = Field(default=None, gt=0)
    """Seconds a pool's reconcile waits for its optional reads (the closed loop's, the pods on
    leaving nodes) before it plans and writes without them; default half the interval, at most
    20 s (`daemon.wiring.default_deadline`)."""
    lease_name: str = "predictive-headroom"
    lease_duration: float = Field(default=15.0, gt=0)
    leader_election: bool = True
    report_dir: Path = Path("/tmp/predictive-headroom/reports")
    report_keep: int = Field(default=5, ge=1)
    retune_window: float = Field(default=14 * 86400.0, ge=86400.0)
    """Seconds of recent history a pool with `protection:` is re-tuned on at each refit (the
    extra fit ends where it starts; at least a day): 14 days by default, the promise rule's
    7-day window plus the 7 days it judges its strictness on (`app.tune.RETUNE_WINDOW`)."""
    choice_window: float = Field(default=28 * 86400.0, ge=2 * 86400.0)
    """Seconds of history a refit reads, at most, to make `tune`'s choice for a `protection:`
    pool (`app.hold`): as much as the source holds up to this; 28 days by default."""
    observe_placeholders: bool = True
    """The closed loop reads placeholder pods and `Preempted` Events in the targets' namespaces
    (read-only; the chart grants it). False: only node boot times are measured."""
    pod_wait_namespaces: str = ""
    """Comma-separated namespaces whose pods the closed loop watches for waiting on a node
    (opt-in: needs list on pods there); empty: none."""
    disruption_read_pods: bool = False
    """List the pods on each leaving node across namespaces (opt-in: `list pods` cluster-wide) for
    the disruption component; false: each leaving node's allocatable stands in for them."""
    node_pod_namespaces: str = ""
    """Comma-separated namespaces the pods on nodes are listed in (`list pods` in each, the chart's
    `disruption.readPodsNamespaces`); empty: every namespace (`list pods` cluster-wide). Pods
    elsewhere are not counted by the disruption and share components."""
    watch: bool = True
    """Read nodes, placeholder pods, `Preempted` Events and the pods on nodes through list-and-watch
    caches (one LIST at start, then a watch); false: LIST them every reconcile."""
    watch_deadline: float = Field(default=150.0, gt=0)
    """Seconds a watch may send nothing (no event, no bookmark) before its cache is listed again."""
    loop_window: float = Field(default=7 * 86400.0, gt=0)
    """Seconds of closed-loop samples kept in memory (node boots, placeholder starts, preemptions)."""
    loop_max_samples: int = Field(default=5000, ge=10)
    """Per pool and kind, the newest closed-loop samples kept at most."""

    @property
    def probes_port(self) -> int:
        """The port the probes listen on (see `probe_port`)."""
        if self.probe_port is not None:
            return self.probe_port
        return 0 if self.listen_port == 0 else 8081

    @field_validator("prometheus_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return check_prometheus_url(value) if value else value
