"""The columns layout's run digest: a digest over what the spans carry.

The line form (``sha256:``, :mod:`cupellation.events._digest`) hashes every
event's canonical JSON line, which for a span trace means re-encoding every item
decision a second time. Under the columns layout the item decisions already
travel as chunk texts the collector produced, so the digest hashes those bytes
instead, and the line form of the few events that are not column rows:

1. **Lines.** ``L = SHA-256`` of the canonical line (after content capture; the
   end event without its ``digest``) of every event that is not a column row,
   in ``seq`` order: the run's start and end, the stage events, overflows,
   count shortfalls, unknown events.
2. **Carrier blocks.** For each span that carries columns (a stage span or the
   root; its ``.part`` children included), ``B = SHA-256`` of::

       <span name> "\\n" <chunk count> "\\n" <UTF-8 byte length of each chunk,
       comma-separated, in chunk index order> "\\n" <the chunks' UTF-8 bytes, in
       chunk index order>

3. **The digest.** ``H(b"cupel-columns/1\\n" + L + the blocks' B in ascending
   byte order)``, with ``H`` SHA-256 (``sha256-columns:<64 hex>``) or, with a
   key, HMAC-SHA256 (``hmac-sha256-columns:<64 hex>``).

Sorting the blocks makes the digest independent of the order spans arrive in;
each block names its span, so columns moved to another span, and a changed,
lost, truncated, added or reordered chunk or part, change it. The decoder
rebuilds ``L`` from the events it decoded other than the column rows (so an
item event that arrives as a span event in a columns trace is a mismatch too)
and each ``B`` from the chunk texts it received.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from typing import Final

from ..events._digest import COLUMNS_HMAC_PREFIX, COLUMNS_SHA256_PREFIX

__all__ = ["DIGEST", "block_digest", "columns_digest"]

#: The root span attribute holding the run digest (the run end's ``digest`` member).
DIGEST: Final = "cupel.run.digest"
_HEAD: Final = b"cupel-columns/1\n"


def block_digest(name: str, data: bytes, lengths: Sequence[int]) -> bytes:
    """The block digest of one carrier span called ``name`` whose chunks are ``data``
    cut into pieces of ``lengths`` bytes."""
    head = f"{name}\n{len(lengths)}\n{','.join(map(str, lengths))}\n"
    digest = hashlib.sha256(head.encode("utf-8", "surrogatepass"))
    digest.update(data)
    return digest.digest()


def columns_digest(lines: bytes, blocks: Iterable[bytes], key: bytes | None = None) -> str:
    """The run digest from the lines' SHA-256 (``lines``, 32 bytes) and the carriers'
    block digests (any order); HMAC-SHA256 with ``key``."""
    payload = _HEAD + lines + b"".join(sorted(blocks))
    if key:
        return COLUMNS_HMAC_PREFIX + hmac.new(key, payload, hashlib.sha256).hexdigest()
    return COLUMNS_SHA256_PREFIX + hashlib.sha256(payload).hexdigest()
