"""A pipeline from a policy file (TOML), and the same policy as a preset tweak.

    python examples/policy_file.py
"""

from pathlib import Path

from cupellation import ContextBudget, ContextItem
from cupellation.policy import get_preset, load_policy

POLICY = Path(__file__).with_name("review_policy.toml")

policy = load_policy(POLICY)
pipeline = policy.build_pipeline()  # the file's [budget] section applies
candidates = [
    ContextItem(content="diff --git a/app.py", tokens=300, kind="Document", priority=5),
    ContextItem(content="CI log: 2 tests failed", tokens=120, kind="ToolOutput", priority=8),
    ContextItem(content="CI log: lint passed", tokens=60, kind="ToolOutput", priority=1),
    ContextItem(content="reviewer: please check the retry loop", tokens=20, priority=9),
]
report = pipeline.dry_run(candidates)
print(f"policy {policy.name!r}: included {[e.item.content for e in report.included]}")
for entry in report.excluded:
    print(f"  excluded {entry.item.content!r}: {entry.reason.name}")

# A preset is a Policy too: print it as the file that would reproduce it.
chat = get_preset("CodeReview")
print(chat.to_toml())
print(chat.build_pipeline(ContextBudget(max_tokens=1000, target_tokens=400)).describe())
