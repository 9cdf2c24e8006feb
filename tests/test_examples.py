"""Every script in examples/ runs as a user would run it, and says what it should."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


#: Loaded first by a Python started with this folder on PYTHONPATH: every socket call
#: fails, so an example passes only if it fetches nothing.
_NO_NETWORK = """\
import socket

def _blocked(*args, **kwargs):
    raise OSError("network blocked by the example test")

for _name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_connection"):
    setattr(socket, _name, _blocked)
for _name in ("connect", "connect_ex", "sendto"):
    setattr(socket.socket, _name, _blocked)
"""


def _run_offline(script: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """The example run as a user would, with the network unreachable and no OTLP
    endpoint configured."""
    (folder / "sitecustomize.py").write_text(_NO_NETWORK, encoding="utf-8")
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_openai_agent_loop_sends_real_requests_within_budget(tmp_path: Path) -> None:
    """The OpenAI SDK loop runs offline (network blocked): the SDK's requests, cut by
    a MessageHistory the loop appends to, with tool outputs trimmed, are accepted by a
    stand-in that refuses what OpenAI refuses; later requests leave whole exchanges out,
    counted exactly."""
    result = _run_offline("openai_agent_loop.py", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "request 4: sent 5 of 11 messages" in result.stdout
    assert "(tiktoken:o200k_base)" in result.stdout
    assert "final answer: Done: six cities checked." in result.stdout
    assert "every request kept the tool-call rules: True" in result.stdout


def test_anthropic_agent_loop_keeps_thinking_and_the_turns_start(tmp_path: Path) -> None:
    """The Anthropic SDK loop with thinking runs offline: the system prompt apart, the
    typed blocks sent back unchanged, counts named as estimates, and the last request
    leaves out a middle exchange while the turn's start (with its thinking) stays."""
    result = _run_offline("anthropic_agent_loop.py", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "estimate:o200k_base, estimate: True" in result.stdout
    assert "request 5: sent 7 of 9 messages" in result.stdout
    assert "left out [3, 4]" in result.stdout
    assert "thinking blocks went back unchanged: True" in result.stdout


def test_langchain_middleware_fits_every_model_call(tmp_path: Path) -> None:
    """create_agent with the before_model middleware (state replaced) and the
    wrap_model_call one (state whole) runs offline; every model call keeps the
    tool-call rules, and only before_model shrinks the state."""
    result = _run_offline("langchain_middleware.py", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "FitStateToBudget: 4 model calls; the final state holds 5 messages" in result.stdout
    assert "FitRequestToBudget: 4 model calls; the final state holds 11 messages" in (
        result.stdout)
    assert result.stdout.count("tool-call rules kept") == 8
    assert "BROKEN" not in result.stdout


def test_openai_agents_filter_fits_every_model_call(tmp_path: Path) -> None:
    """The Agents SDK example (a real Runner, a scripted Model, the one-line filter)
    runs offline: its last turn leaves items out, and every call fits the budget and
    keeps the tool-call rules."""
    result = _run_offline("openai_agents_filter.py", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "turn 2: the last call sent 14 of 18 items" in result.stdout
    assert "6 model calls; every call within 600 tokens: True; tool-call rules kept: True" in (
        result.stdout)


def test_pydantic_ai_processor_fits_every_request_and_keeps_the_history(
        tmp_path: Path) -> None:
    """The PydanticAI example (FunctionModel, ProcessHistory) runs offline: the run's
    own list loses what was left out, the processor's full history keeps it, and every
    request fits the budget."""
    result = _run_offline("pydantic_ai_processor.py", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "the run kept 10 messages, the full history 12" in result.stdout
    assert "6 requests; every request within 600 tokens: True; responses in the full " \
           "history: 6" in result.stdout


def test_langchain_window_middleware_fits_every_model_call(tmp_path: Path) -> None:
    """The LangChain example (create_agent, WindowMiddleware) runs offline: the last
    call leaves messages out while the state keeps all 15, every call fits with the
    system prompt counted, and the tool-call rules hold."""
    result = _run_offline("langchain_window_middleware.py", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "turn 2: the last call sent 12 of 15 messages (system prompt included)" in (
        result.stdout)
    assert "6 model calls; every call within 600 tokens: True; tool-call rules kept: True" in (
        result.stdout)


def test_traced_agent_loop_rebuilds_every_selection_from_its_spans(tmp_path: Path) -> None:
    """Without an OTLP endpoint the traced loop keeps its spans in memory (offline) and
    rebuilds each step's selection from them, trimmed units included; with one it sends
    them (tests/integration/test_example_agent_phoenix.py, against Phoenix)."""
    result = _run_offline("traced_agent_loop.py", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "4 selections rebuilt from 28 spans" in result.stdout
    assert "step 3: sent 6 of 8 messages (464 tokens), left out [2, 3]" in result.stdout


def test_quickstart_selects_and_explains() -> None:
    """The quickstart sends the pinned prompt first, then the newest turns, and says why
    the rest were left out (a duplicate among them)."""
    result = _run("quickstart.py")
    assert result.returncode == 0, result.stderr
    assert "sent: ['You are a support agent.', 'turn 3: ...'," in result.stdout
    assert "(Deduplicated)" in result.stdout
    assert "(BudgetExceeded)" in result.stdout


def test_policy_file_example_builds_from_toml_and_presets() -> None:
    """The policy example reads its TOML file, applies the count cap (a capped tool
    output is CountCapExceeded) and prints a preset as TOML."""
    result = _run("policy_file.py")
    assert result.returncode == 0, result.stderr
    assert "policy 'review'" in result.stdout
    assert "CountCapExceeded" in result.stdout
    assert 'name = "CodeReview"' in result.stdout


def test_agent_loop_traces_every_step_and_rebuilds_the_reports() -> None:
    """The agent loop nests cupel.pipeline under each agent.step span, and rebuilds
    every step's report from the spans (the script asserts equality)."""
    result = _run("agent_loop.py")
    assert result.returncode == 0, result.stderr
    assert "6 reports rebuilt from 42 spans" in result.stdout
    assert "left out ['tool: lookup_invoice" in result.stdout


def test_audit_example_answers_why_from_the_log(tmp_path: Path) -> None:
    """The audit example writes a log, rebuilds each run from it, and `why` explains
    that the refund request lost to higher-scored items in all three runs."""
    log = tmp_path / "audit.jsonl"
    result = _run("audit_and_why.py", str(log))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("refund request left out; report complete: True") == 3
    assert result.stdout.count("EXCLUDED, BudgetExceeded") == 3
    assert log.is_file()


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_is_exercised(script: str) -> None:
    """No example script goes untested: each has a test here or in tests/integration."""
    tested = (Path(__file__).read_text(encoding="utf-8")
              + (ROOT / "tests" / "integration" / "test_example_otlp.py").read_text(
                  encoding="utf-8")
              + (ROOT / "tests" / "integration" / "test_example_agent_phoenix.py").read_text(
                  encoding="utf-8"))
    assert f'"{script}"' in tested


def test_testing_a_policy_runs_its_vocabulary_tests_with_the_plugin_fixtures() -> None:
    """The testing example runs its three pytest tests (the plugin's fixtures, the
    vocabulary's chain, and a failure in the specification's words), all passing."""
    result = _run("testing_a_policy.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert "HaveNoExclusionsForKind(Message) failed: found " in result.stdout
    assert "warning" not in result.stdout.lower()
