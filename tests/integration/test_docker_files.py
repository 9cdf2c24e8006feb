"""The docker/ files agree with each other and with what setup_otlp sends by default:
ports, endpoints, pipeline components, data source URLs, service name, span names."""

from __future__ import annotations

import base64
import fnmatch
import json
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult

from cupellation import ContextBudget, ContextItem, GreedySlice, Pipeline, RecencyScorer
from cupellation.otel import DEFAULT_PHOENIX_PROJECT
from cupellation.otel import _names as otel_names
from cupellation.testing import capture_spans
from cupellation_exporters import (
    DEFAULT_GRPC_ENDPOINT,
    DEFAULT_GRPC_PORT,
    DEFAULT_HTTP_ENDPOINT,
    DEFAULT_HTTP_PORT,
    DEFAULT_SERVICE_NAME,
    OtlpJsonFileSpanExporter,
)
from cupellation_exporters.conventions import (
    EXCLUSION_COUNT_ATTRIBUTE,
    PIPELINE_SPAN,
    STAGE_SPAN_PREFIX,
    STAGES,
    stage_span_name,
)

from .phoenix import PHOENIX_PROJECT_ATTRIBUTE, PROJECT_HEADER

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COLLECTOR = "otel-collector"


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


def _ports(service: dict[str, Any]) -> dict[int, int]:
    """A service's published ports as {container port: host port}."""
    published: dict[int, int] = {}
    for entry in service.get("ports", []):
        host, _, container = str(entry).rpartition(":")
        published[int(container.split("/")[0])] = int(host)
    return published


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """A service's volumes as {container path: source}."""
    mounts: dict[str, str] = {}
    for entry in service.get("volumes", []):
        source, target, *_ = str(entry).split(":")
        mounts[target] = source
    return mounts


def _host_port(endpoint: str) -> tuple[str, int]:
    parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    assert parts.hostname is not None, endpoint
    assert parts.port is not None, endpoint
    return parts.hostname, parts.port


def test_the_collector_listens_where_setup_otlp_sends_by_default(
        compose: dict[str, Any], collector: dict[str, Any]) -> None:
    """setup_otlp's default endpoints (HTTP 4318, gRPC 4317 on localhost) reach the
    collector's OTLP receiver: it listens on those ports and compose publishes them
    unchanged."""
    protocols = collector["receivers"]["otlp"]["protocols"]
    assert _host_port(protocols["http"]["endpoint"])[1] == DEFAULT_HTTP_PORT
    assert _host_port(protocols["grpc"]["endpoint"])[1] == DEFAULT_GRPC_PORT
    published = _ports(compose["services"][COLLECTOR])
    assert published[DEFAULT_HTTP_PORT] == _host_port(DEFAULT_HTTP_ENDPOINT)[1]
    assert published[DEFAULT_GRPC_PORT] == _host_port(DEFAULT_GRPC_ENDPOINT)[1]


def test_every_pipeline_component_is_defined_and_every_definition_used(
        collector: dict[str, Any]) -> None:
    """Each receiver, processor and exporter named by a service pipeline is defined,
    each defined one is used, and traces arrive both live (otlp) and from files
    (otlpjsonfile) and go to Jaeger, Tempo and Phoenix."""
    pipelines = collector["service"]["pipelines"]
    for kind in ("receivers", "processors", "exporters"):
        used = {name for pipeline in pipelines.values() for name in pipeline.get(kind, [])}
        defined = set(collector.get(kind) or {})
        assert used <= defined, (kind, used - defined)
        assert defined <= used, (kind, defined - used)
    traces = pipelines["traces"]
    assert {"otlp", "otlpjsonfile"} <= set(traces["receivers"])
    assert {"otlp/jaeger", "otlp/tempo", "otlphttp/phoenix"} <= set(traces["exporters"])
    assert "otlp" in pipelines["metrics"]["receivers"]  # setup_otlp sends metrics too


def test_collector_exporters_point_at_ports_their_services_listen_on(
        compose: dict[str, Any], collector: dict[str, Any]) -> None:
    """otlp/jaeger goes to jaeger:4317 (Jaeger v2's OTLP gRPC), otlp/tempo to the
    gRPC port Tempo's distributor listens on, otlphttp/phoenix to Phoenix's HTTP port
    with the project header naming the project `report --from phoenix` reads by
    default, all services that compose defines."""
    services = compose["services"]
    exporters = collector["exporters"]
    host, port = _host_port(exporters["otlp/jaeger"]["endpoint"])
    assert (host, port) == ("jaeger", DEFAULT_GRPC_PORT)
    assert host in services

    tempo = _yaml(DOCKER / "tempo.yaml")
    tempo_grpc = tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    host, port = _host_port(exporters["otlp/tempo"]["endpoint"])
    assert host == "tempo"
    assert host in services
    assert port == _host_port(tempo_grpc)[1]

    phoenix = exporters["otlphttp/phoenix"]
    host, port = _host_port(phoenix["endpoint"])
    assert host == "phoenix"
    assert host in services
    assert port in _ports(services["phoenix"])  # the container port compose publishes
    assert phoenix.get("encoding", "proto") == "proto"  # Phoenix refuses OTLP/JSON (415)
    assert phoenix["headers"][PROJECT_HEADER] == DEFAULT_PHOENIX_PROJECT


def test_collector_files_are_mounted_where_its_config_reads_them(
        compose: dict[str, Any], collector: dict[str, Any]) -> None:
    """The collector's --config path and the otlpjsonfile folder are mounted from
    docker/ files and folders that exist."""
    service = compose["services"][COLLECTOR]
    mounts = _mounts(service)
    [config_arg] = [arg for arg in service["command"] if arg.startswith("--config=")]
    config_path = config_arg.removeprefix("--config=")
    assert (DOCKER / mounts[config_path]).resolve() == DOCKER / "otel-collector.yaml"
    [pattern] = collector["receivers"]["otlpjsonfile"]["include"]
    folder = str(Path(pattern).parent)
    assert (DOCKER / mounts[folder]).resolve().is_dir()
    assert pattern.endswith(".jsonl")


def test_each_config_file_is_mounted_and_exists(compose: dict[str, Any]) -> None:
    """Every bind-mounted ./ path in compose exists under docker/ (named volumes are
    declared), so `docker compose up` finds its configuration."""
    declared = set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        for target, source in _mounts(service).items():
            if source.startswith("."):
                assert (DOCKER / source).exists(), (name, source, target)
            else:
                assert source in declared, (name, source)


def test_grafana_data_sources_reach_tempo_and_jaeger(compose: dict[str, Any]) -> None:
    """The provisioned Tempo data source uses Tempo's HTTP port from tempo.yaml, the
    Jaeger one Jaeger's UI/query port, both compose services; the provisioning folder
    is mounted where Grafana reads it."""
    services = compose["services"]
    mounts = _mounts(services["grafana"])
    assert (DOCKER / mounts["/etc/grafana/provisioning"]).resolve() == (
        DOCKER / "grafana" / "provisioning")
    sources = {source["type"]: source for source in _yaml(
        DOCKER / "grafana/provisioning/datasources/datasources.yaml")["datasources"]}
    tempo_port = _yaml(DOCKER / "tempo.yaml")["server"]["http_listen_port"]
    assert _host_port(sources["tempo"]["url"]) == ("tempo", tempo_port)
    assert sources["tempo"]["isDefault"] is True
    host, port = _host_port(sources["jaeger"]["url"])
    assert host == "jaeger"
    assert port in _ports(services["jaeger"])


def test_published_host_ports_do_not_clash_and_phoenix_grpc_moves_aside(
        compose: dict[str, Any]) -> None:
    """No host port is published twice; Phoenix's UI is on 6006 and its gRPC 4317 on
    a host port other than the collector's."""
    host_ports = [host for service in compose["services"].values()
                  for host in _ports(service).values()]
    assert len(host_ports) == len(set(host_ports))
    phoenix = _ports(compose["services"]["phoenix"])
    assert phoenix[6006] == 6006
    assert phoenix[DEFAULT_GRPC_PORT] != DEFAULT_GRPC_PORT


def test_phoenix_image_matches_the_version_the_tests_run_against(
        compose: dict[str, Any]) -> None:
    """compose's Phoenix image tag is the arize-phoenix version install-phoenix.sh pins."""
    script = (ROOT / "scripts" / "install-phoenix.sh").read_text(encoding="utf-8")
    pinned = re.search(r'PHOENIX_VERSION:-([0-9][^}"]*)', script)
    assert pinned is not None
    assert compose["services"]["phoenix"]["image"] == (
        f"arizephoenix/phoenix:version-{pinned.group(1)}")


def test_cli_service_sends_to_the_collector_as_cupellation(compose: dict[str, Any]) -> None:
    """The CLI service is built from docker/Dockerfile and exports to the collector's
    OTLP/HTTP port under setup_otlp's default service name."""
    service = compose["services"]["cupellation"]
    assert (DOCKER / service["build"]["context"] / service["build"]["dockerfile"]).resolve() \
        == DOCKER / "Dockerfile"
    environment = service["environment"]
    assert _host_port(environment["OTEL_EXPORTER_OTLP_ENDPOINT"]) == (
        COLLECTOR, DEFAULT_HTTP_PORT)
    assert environment.get("OTEL_SERVICE_NAME", DEFAULT_SERVICE_NAME) == DEFAULT_SERVICE_NAME


def test_dockerfile_builds_the_cli_from_python_311_slim() -> None:
    """The Dockerfile starts from python:3.11-slim, installs the repository and the
    exporters, and its ENTRYPOINT is the console script the root pyproject declares."""
    text = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    instructions = [line.split(None, 1) for line in text.splitlines()
                    if line.strip() and not line.lstrip().startswith("#")
                    and not line.startswith((" ", "\t"))]
    froms = [rest for word, *rest in instructions if word == "FROM"]
    assert froms == [["python:3.11-slim"]]
    [entrypoint] = [rest[0] for word, *rest in instructions if word == "ENTRYPOINT"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["scripts"]
    assert yaml.safe_load(entrypoint) == ["cupellation"]
    assert "cupellation" in scripts
    assert re.search(r"pip install \"\.\[cli\]\" \./exporters", text)


def test_guide_names_the_default_endpoint_service_and_span_vocabulary() -> None:
    """docker/README.md gives the OTLP/HTTP endpoint setup_otlp expects, the service
    name, the UIs' host ports, every span name, and a TraceQL query for runs with
    exclusions built from the real span and attribute names."""
    guide = (DOCKER / "README.md").read_text(encoding="utf-8")
    assert f"OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:{DEFAULT_HTTP_PORT}" in guide
    assert f"`{DEFAULT_SERVICE_NAME}`" in guide
    for url in ("http://localhost:16686", "http://localhost:3000", "http://localhost:6006"):
        assert url in guide
    assert f"`{PIPELINE_SPAN}`" in guide
    for stage in STAGES:
        assert f"`{stage_span_name(stage)}`" in guide
    query = (f'{{ name =~ "{STAGE_SPAN_PREFIX}*" && '
             f"span.{EXCLUSION_COUNT_ATTRIBUTE} > 0 }}")
    assert query in guide
    assert PHOENIX_PROJECT_ATTRIBUTE in guide


def _container_path(compose: dict[str, Any], host_folder: Path, name: str) -> str:
    """Where the collector sees ``host_folder/name`` (through its bind mounts)."""
    for target, source in _mounts(compose["services"][COLLECTOR]).items():
        if (DOCKER / source).resolve() == host_folder.resolve():
            return f"{target.rstrip('/')}/{name}"
    raise AssertionError(f"{host_folder} is not mounted into the collector")


def test_otlp_json_files_from_cupellation_are_what_the_collector_reads(
        compose: dict[str, Any], collector: dict[str, Any], tmp_path: Path) -> None:
    """The file the guide tells `cupellation export --to file` to write lands where the
    otlpjsonfile receiver's include pattern looks (read from the beginning), and
    OtlpJsonFileSpanExporter's lines are what that receiver parses: one
    ExportTraceServiceRequest per line in OTLP/JSON (hex ids), accepted by
    protobuf's parser with no unknown member once the ids are in its base64."""
    receiver = collector["receivers"]["otlpjsonfile"]
    [pattern] = receiver["include"]
    assert receiver.get("start_at") == "beginning"
    guide = (DOCKER / "README.md").read_text(encoding="utf-8")
    [written] = re.findall(r"--to file --out (docker/otlp-json/\S+)", guide)
    name = Path(written).name
    assert fnmatch.fnmatch(_container_path(compose, DOCKER / "otlp-json", name), pattern)

    path = tmp_path / name
    exporter = OtlpJsonFileSpanExporter(path)
    with capture_spans() as captured:
        Pipeline(RecencyScorer(), GreedySlice()).run(
            [ContextItem(f"item {k}", 10 + k) for k in range(12)],
            ContextBudget(max_tokens=100, target_tokens=60), captured.collector)
        assert exporter.export(captured.spans) is SpanExportResult.SUCCESS
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    for line in lines[:-1]:
        document = json.loads(line)
        assert list(document) == ["resourceSpans"]
        for resource in document["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            assert re.fullmatch(r"[0-9a-f]+", span[key])
                            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
        json_format.ParseDict(document, ExportTraceServiceRequest())


def test_the_guide_s_names_are_what_cupellation_otel_writes() -> None:
    """The span and attribute names the guide queries (and the conventions module
    gives) are cupellation.otel's own, and a real run's spans carry them: stage spans
    cupel.exclusion.count, the root cupel.run.excluded_count and cupel.run.outcome;
    the guide shows the demo's --otlp and cupellation export both ways."""
    assert PIPELINE_SPAN == otel_names.ROOT_SPAN
    assert STAGE_SPAN_PREFIX == otel_names.STAGE_PREFIX
    assert EXCLUSION_COUNT_ATTRIBUTE == otel_names.EXCLUSION_COUNT
    assert tuple(otel_names.stage_label(s) for s in otel_names.SPAN_STAGES) == STAGES
    with capture_spans(tier="StageAndExclusions") as captured:
        Pipeline(RecencyScorer(), GreedySlice()).run(
            [ContextItem(f"item {k}", 10 + k) for k in range(12)],
            ContextBudget(max_tokens=100, target_tokens=60), captured.collector)
        spans = {span.name: dict(span.attributes or {}) for span in captured.spans}
    root = spans[PIPELINE_SPAN]
    assert root["cupel.run.excluded_count"] > 0
    assert root["cupel.run.outcome"] == "completed"
    assert spans[stage_span_name("slice")][EXCLUSION_COUNT_ATTRIBUTE] > 0
    guide = (DOCKER / "README.md").read_text(encoding="utf-8")
    for text in ('{ name = "cupel.pipeline" && span.cupel.run.excluded_count > 0 }',
                 '{ name = "cupel.pipeline" && span.cupel.run.outcome = "failed" }',
                 "cupellation demo --otlp", "cupellation export out/audit.jsonl --to otlp",
                 "--to file --out docker/otlp-json/"):
        assert text in guide, text
