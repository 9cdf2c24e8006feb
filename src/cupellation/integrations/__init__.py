"""One small module per agent framework: the framework's own hook for "what the model
sees on this call", filled by :func:`~cupellation.select_messages`.

- :mod:`cupellation.integrations.openai_agents`: ``RunConfig(call_model_input_filter=
  input_filter(max_tokens=8000))`` (``pip install 'cupellation[openai-agents]'``);
- :mod:`cupellation.integrations.pydantic_ai`: ``Agent(capabilities=[ProcessHistory(
  history_processor(max_tokens=8000))])`` (``pip install 'cupellation[pydantic-ai]'``);
- :mod:`cupellation.integrations.langchain`: ``create_agent(model, tools, middleware=
  [WindowMiddleware(max_tokens=8000)])`` (``pip install 'cupellation[langchain]'``).

Each takes a :class:`~cupellation.chat.SelectOptions` (or its fields as keywords),
keeps tool exchanges whole, keeps the model's input within the budget by the
configured token counter (the instructions or system prompt the framework passes
apart are counted and always kept), trims what ``trim=`` says, and records every
call: ``collector=`` receives its events, with a :class:`~cupellation.RunInfo` that
carries the framework's conversation ids; ``last`` holds the last call's
:class:`~cupellation.chat.MessageSelection` (its report says why each message was or
was not sent), and ``on_select=`` is called with each one.

This package imports no framework; each module imports its own, so import the one
you use.

.. versionadded:: 0.4
"""

from __future__ import annotations

from ._window import Window

__all__ = ["Window"]
