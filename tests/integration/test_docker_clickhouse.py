"""docker/'s ClickHouse path, read (the images cannot run here): the collector receives
OTLP logs and traces and tails audit files into the clickhouse exporter's tables; its
filelog operators map the fields the audit log writes; the ports and credentials agree
with compose and Grafana; the dashboard's SQL names only otel_logs columns and keys the
flat mapping has; the root .dockerignore keeps the build context small."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from cupellation import ContextBudget, ContextItem, Pipeline, PriorityScorer, RunInfo
from cupellation.events._flat import flat_keys
from cupellation.events._types import KNOWN_EVENTS
from cupellation.logs import AuditLog

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DASHBOARDS = DOCKER / "grafana" / "provisioning" / "dashboards"
#: The columns of otel_logs as the clickhouse exporter creates it in its default (Map)
#: mode (exporter/clickhouseexporter/internal/sqltemplates/logs_table.sql).
OTEL_LOGS_COLUMNS = frozenset({
    "Timestamp", "TimestampTime", "TraceId", "SpanId", "TraceFlags", "SeverityText",
    "SeverityNumber", "ServiceName", "Body", "ResourceSchemaUrl", "ResourceAttributes",
    "ScopeSchemaUrl", "ScopeName", "ScopeVersion", "ScopeAttributes", "LogAttributes",
    "EventName"})
EVENT_TYPES = frozenset(cls.type for cls in KNOWN_EVENTS)
FLAT_KEYS = frozenset(key for kind in EVENT_TYPES for key in flat_keys(kind) or ())


def _yaml(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), path
    return loaded


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """docker/compose.yaml, parsed."""
    return _yaml(DOCKER / "compose.yaml")


@pytest.fixture(scope="module")
def collector() -> dict[str, Any]:
    """docker/otel-collector.yaml, parsed."""
    return _yaml(DOCKER / "otel-collector.yaml")


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    return {str(entry).split(":")[1]: str(entry).split(":")[0]
            for entry in service.get("volumes", [])}


def _env_default(value: str) -> str:
    """``${env:NAME:-default}`` as the collector reads it with NAME unset."""
    found = re.fullmatch(r"\$\{env:[A-Z_]+:-([^}]*)\}", value)
    return found.group(1) if found else value


def test_logs_and_traces_reach_the_clickhouse_exporter_in_map_mode(
        collector: dict[str, Any]) -> None:
    """OTLP logs, tailed audit logs and OTLP traces all go to the clickhouse exporter,
    which creates its tables (create_schema) in the default Map mode (no json key), in
    a named database with a TTL, as otel_logs and otel_traces, batching in its queue."""
    pipelines = collector["service"]["pipelines"]
    assert "clickhouse" in pipelines["traces"]["exporters"]
    into = {name: pipeline["receivers"] for name, pipeline in pipelines.items()
            if name.split("/")[0] == "logs" and "clickhouse" in pipeline["exporters"]}
    assert {"otlp", "filelog/audit"} <= {r for receivers in into.values() for r in receivers}
    clickhouse = collector["exporters"]["clickhouse"]
    assert clickhouse["create_schema"] is True
    assert "json" not in clickhouse
    assert (clickhouse["logs_table_name"], clickhouse["traces_table_name"]) == (
        "otel_logs", "otel_traces")
    assert clickhouse["database"] == "otel"
    assert re.fullmatch(r"[0-9]+h", clickhouse["ttl"])
    assert clickhouse["sending_queue"]["batch"]["min_size"] >= 5000


def test_the_exporter_and_grafana_reach_the_clickhouse_compose_runs(
        compose: dict[str, Any], collector: dict[str, Any]) -> None:
    """The exporter's endpoint is compose's clickhouse service on the native port it
    publishes, with the user and password that service creates (the collector's own
    environment gives them), and the database it creates; Grafana's ClickHouse data
    source (the grafana-clickhouse-datasource plugin, installed by compose) uses the
    same host, port, user, password and database; the collector starts once
    ClickHouse answers."""
    services = compose["services"]
    server = services["clickhouse"]
    published = {int(str(p).rpartition(":")[2]) for p in server["ports"]}
    exporter = collector["exporters"]["clickhouse"]
    parts = urlsplit(exporter["endpoint"])
    assert (parts.scheme, parts.hostname) == ("tcp", "clickhouse")
    assert parts.port in published
    env = server["environment"]
    own = services["otel-collector"]["environment"]
    assert own["CLICKHOUSE_USER"] == env["CLICKHOUSE_USER"] == _env_default(
        exporter["username"])
    assert own["CLICKHOUSE_PASSWORD"] == env["CLICKHOUSE_PASSWORD"] == _env_default(
        exporter["password"])
    assert env["CLICKHOUSE_DB"] == exporter["database"]
    assert services["otel-collector"]["depends_on"]["clickhouse"]["condition"] == (
        "service_healthy")
    assert "grafana-clickhouse-datasource" in services["grafana"]["environment"][
        "GF_INSTALL_PLUGINS"]
    [source] = [s for s in _yaml(DOCKER / "grafana/provisioning/datasources/datasources.yaml")[
        "datasources"] if s["type"] == "grafana-clickhouse-datasource"]
    data = source["jsonData"]
    assert (data["host"], data["port"], data["protocol"]) == ("clickhouse", parts.port, "native")
    assert data["username"] == env["CLICKHOUSE_USER"]
    assert source["secureJsonData"]["password"] == env["CLICKHOUSE_PASSWORD"]
    assert data["defaultDatabase"] == exporter["database"]
    assert data["logs"]["defaultTable"] == exporter["logs_table_name"]


def _audit_line(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as audit:
        Pipeline(scorer=PriorityScorer()).run(
            [ContextItem(content=f"c{k}", tokens=30) for k in range(3)],
            ContextBudget(max_tokens=100, target_tokens=50), audit,
            run_info=RunInfo(service="svc"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_filelog_maps_the_fields_the_audit_log_writes(
        compose: dict[str, Any], collector: dict[str, Any], tmp_path: Path) -> None:
    """The filelog receiver reads *.jsonl from the folder compose mounts from
    docker/audit-logs; json_parser moves each line's JSON fields into attributes; body
    becomes a copy of `type` (kept in the attributes too, as the flat mapping has it);
    the timestamp is parsed from `started_at` only where present, with a Go layout that
    reads what the audit log writes; no file-name attribute is added. Checked against
    a real audit log's lines."""
    receiver = collector["receivers"]["filelog/audit"]
    [pattern] = receiver["include"]
    mounts = _mounts(compose["services"]["otel-collector"])
    assert (DOCKER / mounts[str(Path(pattern).parent)]).resolve() == DOCKER / "audit-logs"
    assert pattern.endswith("*.jsonl")
    assert receiver["include_file_name"] is False
    parser, copy, timer = receiver["operators"]
    assert parser["type"] == "json_parser"
    assert (parser.get("parse_from", "body"), parser.get("parse_to", "attributes")) == (
        "body", "attributes")
    assert (copy["type"], copy["from"], copy["to"]) == ("copy", "attributes.type", "body")
    assert timer["type"] == "time_parser"
    assert timer["parse_from"] == "attributes.started_at"
    assert "attributes.started_at" in timer["if"]
    assert timer["layout_type"] == "gotime"
    lines = _audit_line(tmp_path)
    for line in lines:
        assert set(line) <= flat_keys(line["type"])  # type: ignore[operator]
        assert "type" in line
    [started] = [line for line in lines if "started_at" in line]
    assert started["type"] == "run_started"
    assert started["service"] == "svc"
    # The Go layout 2006-01-02T15:04:05.999999999Z07:00, written as a pattern.
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)",
                        started["started_at"])
    assert timer["layout"] == "2006-01-02T15:04:05.999999999Z07:00"
    processors = collector["service"]["pipelines"]["logs/audit"]["processors"]
    [named] = [a for name in processors
               for a in collector["processors"][name].get("attributes", [])
               if a["key"] == "service.name"]
    assert _env_default(named["value"]) == compose["services"]["otel-collector"][
        "environment"]["AUDIT_SERVICE_NAME"]


def _dashboard() -> dict[str, Any]:
    loaded = json.loads((DASHBOARDS / "cupellation-fleet.json").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _queries(dashboard: dict[str, Any]) -> list[str]:
    found = [target["rawSql"] for panel in dashboard["panels"]
             for target in panel["targets"]]
    found += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return found


def sql_problems(sql: str) -> list[str]:
    """What in ``sql`` names something otel_logs or the flat mapping does not have: a
    CamelCase identifier that is not a column, a LogAttributes key that is no event's
    flat key, a Body literal that is no event type, a table other than otel.otel_logs."""
    problems = [f"column {name}" for name in re.findall(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*\b",
                                                         sql)
                if name not in OTEL_LOGS_COLUMNS]
    problems += [f"key {key}" for key in re.findall(r"LogAttributes\['([^']*)'\]", sql)
                 if key not in FLAT_KEYS]
    for compared in re.findall(r"Body\s*(?:=\s*'[^']*'|IN\s*\([^)]*\))", sql):
        problems += [f"type {kind}" for kind in re.findall(r"'([^']*)'", compared)
                     if kind not in EVENT_TYPES]
    problems += [f"table {table}" for table in re.findall(r"\bFROM\s+([\w.]+)", sql)
                 if table != "otel.otel_logs"]
    return problems


def test_the_dashboard_queries_only_what_otel_logs_and_the_events_hold() -> None:
    """Every panel and variable query of the Grafana dashboard reads otel.otel_logs
    through the ClickHouse data source, and names only the exporter's otel_logs
    columns, keys the events' flat mapping really has and event types that exist; the
    panels cover exclusions by reason, kind and service, budget utilisation
    percentiles and failures. The checker itself flags a made-up column, key, type
    and table."""
    dashboard = _dashboard()
    queries = _queries(dashboard)
    assert queries
    for sql in queries:
        assert sql_problems(sql) == [], sql
    for panel in dashboard["panels"]:
        assert panel["datasource"]["type"] == "grafana-clickhouse-datasource"
    text = "\n".join(queries)
    for needed in ("LogAttributes['reason.name']", "LogAttributes['item.kind']",
                   "ServiceName AS service", "quantile(0.9)", "Body = 'run_failed'"):
        assert needed in text, needed
    assert sql_problems("SELECT Bogus, LogAttributes['reason.nam'] FROM otel.otel_logs "
                        "JOIN x WHERE Body = 'item_dropped'") == [
        "column Bogus", "key reason.nam", "type item_dropped"]
    assert sql_problems("SELECT Body FROM default.logs") == ["table default.logs"]


def test_the_dashboard_is_provisioned_from_where_compose_mounts_it(
        compose: dict[str, Any]) -> None:
    """Grafana's dashboard provider reads the folder compose mounts the dashboard from."""
    provider = _yaml(DASHBOARDS / "dashboards.yaml")
    [entry] = provider["providers"]
    path = entry["options"]["path"]
    mounts = _mounts(compose["services"]["grafana"])
    [(target, source)] = [(t, s) for t, s in mounts.items() if path.startswith(t)]
    assert (DOCKER / source / Path(path).relative_to(target)).resolve() == DASHBOARDS
    assert _dashboard()["uid"] == "cupellation-fleet"


def test_the_root_dockerignore_keeps_venvs_outputs_and_git_out() -> None:
    """The root .dockerignore (the build context of docker/Dockerfile) excludes the git
    history, virtual environments and out/."""
    lines = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "**/.venv", "out"} <= lines
