"""Audit past selections from a log: "why did the agent not see the refund request?"

    python examples/audit_and_why.py [LOG]

Each run writes its events to an audit log (JSON lines, rotated and gzipped when
large). Later, the log alone rebuilds every run's SelectionReport, and the
``cupellation why`` command answers for one item across all runs.
"""

import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    Pipeline,
    PriorityScorer,
    RecencyScorer,
)
from cupellation.logs import AuditLog, read_runs

log_path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "audit.jsonl"
refund = "customer: please refund the duplicate charge on invoice 1043"
pipeline = Pipeline(
    scorer=CompositeScorer([(RecencyScorer(), 1.0), (PriorityScorer(), 1.0)]),
    budget=ContextBudget(max_tokens=120, target_tokens=60),
)
tuesday = datetime(2026, 11, 17, 14, 0, tzinfo=UTC)

with AuditLog(log_path, max_bytes=1_000_000, backup_count=3) as audit:  # one log, many runs
    for day in range(3):
        now = tuesday + timedelta(days=day)
        candidates = [
            ContextItem(content=refund, tokens=25, timestamp=tuesday, priority=1),
            *(ContextItem(content=f"day {day} message {k}", tokens=15, priority=2,
                          timestamp=now + timedelta(minutes=k)) for k in range(4)),
        ]
        pipeline.run(candidates, collector=audit)

# The library: every run, rebuilt from the log alone.
for run in read_runs(log_path):
    kept = any(e.item.content == refund for e in run.report.included)
    print(f"run …{run.run_id[-6:]} at {run.started_at:%H:%M:%S}: refund request "
          f"{'sent' if kept else 'left out'}; report complete: {run.report.is_complete}")

# The command line: the same question, answered with the reasons and what beat it.
why = subprocess.run([sys.executable, "-m", "cupellation.cli", "why", str(log_path),
                      "--content", refund, "--no-progress"],
                     capture_output=True, text=True, check=False)
print(why.stdout)
sys.exit(why.returncode)
