"""Quickstart: pick what fits in the window, and see why each candidate was or was not picked.

    python examples/quickstart.py
"""

from datetime import UTC, datetime, timedelta

from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer

now = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
candidates = [
    # Items are placed in time order (the default placer), and the specification puts
    # items without a timestamp last: the prompt gets the conversation's start.
    ContextItem(content="You are a support agent.", tokens=8, kind="SystemPrompt", pinned=True,
                timestamp=now - timedelta(minutes=1)),
    *(ContextItem(content=f"turn {k}: ...", tokens=40, timestamp=now + timedelta(minutes=k))
      for k in range(6)),
    ContextItem(content="turn 5: ...", tokens=40, timestamp=now),  # a duplicate
]
pipeline = Pipeline(scorer=RecencyScorer(), budget=ContextBudget(max_tokens=200, target_tokens=150))

window = pipeline.run(candidates)                 # the items to send, in order
report = pipeline.dry_run(candidates)             # the same run, explained

print("sent:", [item.content for item in window])
for entry in report.excluded:
    print(f"left out: {entry.item.content!r} ({entry.reason.name})")
print(report.to_json(indent=2)[:400])
