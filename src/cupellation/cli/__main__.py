"""``python -m cupellation.cli``."""

from __future__ import annotations

from . import main

raise SystemExit(main())
