"""The per-run digest: what lets a reader tell that a stored run is the run that was
written.

**What it covers.** The run's canonical lines: for each event of the run, in
``seq`` order, its JSON line (:func:`~cupellation.events.event_to_json` of the
event after the sink's content capture) and a newline, in UTF-8 — exactly the
bytes an audit log writes. The end event (``run_completed`` or ``run_failed``)
is hashed without its ``digest`` member, which then carries the result. Under
content capture ``hash`` or ``none`` the lines hold the captured content, so
the digest holds for what was recorded.

**Two forms.** ``sha256:<64 hex>`` detects corruption: a changed, lost,
repeated or reordered line, a value swapped for another plausible one. It is
NOT tamper-proof: anyone who can edit the file can recompute it. With a key
(``digest_key=``, or the ``CUPELLATION_DIGEST_KEY`` environment variable) it is
``hmac-sha256:<64 hex>``, which also detects tampering by anyone without the
key.

**The columns form.** A span trace in the columns layout carries
``sha256-columns:<64 hex>`` (keyed: ``hmac-sha256-columns:<64 hex>``), a digest
over what its spans carry rather than over every event's line (see
:mod:`cupellation.otel._digest`). The prefix names the canonical form; readers
dispatch on it, so the line forms above keep reading as before.

**Checking.** Every decoder recomputes the digest from what it decoded and
compares; :func:`check_digest` turns the comparison into a
:class:`Verification` and, for a mismatch, the line the rebuilt report lists in
``incomplete``. :func:`digest_verdict` then decides, in one place for every
reader, whether that outcome leaves the run clean given whether the reader
holds a key.

**What each form cannot do.** Neither form stops a writer who holds the key (or,
for the plain form, anyone) from writing a false run and its matching digest, and
neither notices a whole run deleted from a log: a digest covers one run, and a
log is not chained from run to run.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from collections.abc import Callable
from typing import Any, Final

from ..exceptions import InvalidTypeError

__all__ = [
    "COLUMNS_HMAC_PREFIX",
    "COLUMNS_SHA256_PREFIX",
    "HMAC_PREFIX",
    "SHA256_PREFIX",
    "DigestCheck",
    "RunDigest",
    "RunHasher",
    "Verification",
    "UNCHECKED_NOTE",
    "UNSIGNED_NOTE",
    "check_digest",
    "digest_verdict",
]

SHA256_PREFIX: Final = "sha256:"
HMAC_PREFIX: Final = "hmac-sha256:"
#: The span columns layout's form (see :mod:`cupellation.otel._digest`).
COLUMNS_SHA256_PREFIX: Final = "sha256-columns:"
COLUMNS_HMAC_PREFIX: Final = "hmac-sha256-columns:"
_KEYED: Final = (HMAC_PREFIX, COLUMNS_HMAC_PREFIX)
#: The schema that first carried a run digest (older lines carry none).
_FIRST_DIGEST_SCHEMA: Final = 3
#: How the note of a run that is not signed with the reader's key begins.
UNSIGNED_NOTE: Final = "not signed with the configured key"
#: How the note of a keyed digest read without a key begins.
UNCHECKED_NOTE: Final = "signature not checked"


class RunDigest:
    """An accumulator of one run's canonical bytes: SHA-256, or HMAC-SHA256 with ``key``.

    ``update`` takes the bytes as they are written (one call per chunk is the
    same as one call for their concatenation); ``hexdigest`` gives the text a
    run's end event carries, with its algorithm prefix.

    .. versionadded:: 0.3
    """

    __slots__ = ("_hash", "_prefix")

    def __init__(self, key: bytes | None = None) -> None:
        if key is not None and not isinstance(key, bytes | bytearray):
            raise InvalidTypeError("key", key, "bytes or None")
        self._hash: Any = (hashlib.sha256() if not key
                           else hmac.new(key, digestmod=hashlib.sha256))
        self._prefix = HMAC_PREFIX if key else SHA256_PREFIX

    @property
    def keyed(self) -> bool:
        """True for HMAC-SHA256."""
        return self._prefix == HMAC_PREFIX

    def update(self, data: bytes) -> None:
        """Add ``data`` (bytes of canonical lines) to the digest."""
        self._hash.update(data)

    def update_function(self) -> Callable[[bytes], None]:
        """:meth:`update`, as the underlying hash's own bound method (no call between)."""
        update: Callable[[bytes], None] = self._hash.update
        return update

    def hexdigest(self) -> str:
        """``sha256:<hex>`` or ``hmac-sha256:<hex>`` of everything added so far."""
        text: str = self._hash.hexdigest()
        return self._prefix + text

    def __repr__(self) -> str:
        return f"RunDigest({'hmac-sha256' if self.keyed else 'sha256'})"


class Verification(enum.StrEnum):
    """What checking a run's digest found.

    ``verified``: the recorded digest matches what was read (SHA-256 detects
    corruption; an HMAC also proves the key's holder wrote it). ``unverified``:
    the run carries no digest (written before schema 3, or its end is missing).
    ``mismatch``: the run's events are not what was written. ``key missing``: an
    HMAC digest, read without the key, so it could not be checked. ``unkeyed``:
    the reader holds a key but the run carries a plain SHA-256 digest, which
    matched: no corruption, but no proof against tampering either.

    The status says what the check found; whether the run is clean is
    :func:`digest_verdict`'s call (with a key at the reader, ``unkeyed`` and
    ``unverified`` are not; without one, ``key missing`` is not).

    .. versionadded:: 0.3
    """

    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    MISMATCH = "mismatch"
    KEY_MISSING = "key missing"
    UNKEYED = "unkeyed"


class DigestCheck:
    """The outcome of :func:`check_digest` or :func:`digest_verdict`: a status, and
    when the run is not clean the line the rebuilt report lists in ``incomplete``
    (``leading``: listed first, since it concerns the trust in every other line)."""

    __slots__ = ("leading", "note", "status")

    def __init__(self, status: Verification, note: str | None = None, *,
                 leading: bool = False) -> None:
        self.status = status
        self.note = note
        self.leading = leading

    def __repr__(self) -> str:
        return f"DigestCheck({self.status.value!r})"


class RunHasher:
    """The reader's side: hashes a run's canonical bytes both ways it may need them
    (SHA-256 always; HMAC-SHA256 too when the reader holds a key), since which one
    the run used is known only at its end."""

    __slots__ = ("_keyed", "_plain", "update")

    def __init__(self, key: bytes | None = None) -> None:
        self._plain = RunDigest()
        self._keyed = RunDigest(key) if key else None
        #: Add the bytes of canonical lines (the hash's own method when there is one
        #: hash: a reader calls it once per line).
        self.update: Callable[[bytes], None] = (
            self._plain.update_function() if self._keyed is None else self._update_both)

    def _update_both(self, data: bytes) -> None:
        self._plain.update(data)
        assert self._keyed is not None
        self._keyed.update(data)

    def check(self, recorded: str | None) -> DigestCheck:
        """Compare with the digest the run recorded (see :func:`check_digest`)."""
        return check_digest(recorded, self._plain.hexdigest(),
                            None if self._keyed is None else self._keyed.hexdigest())


def check_digest(recorded: str | None, computed: str, computed_keyed: str | None = None
                 ) -> DigestCheck:
    """Compare a run's recorded digest with the ones computed from what was read.

    ``computed`` is the plain SHA-256 (``sha256:<hex>``), ``computed_keyed`` the
    HMAC when the reader holds a key. A recorded digest of neither form is a
    mismatch (it is not what any writer writes).
    """
    if recorded is None:
        return DigestCheck(Verification.UNVERIFIED)
    keyed = recorded.startswith(_KEYED)
    if keyed:
        if computed_keyed is None:
            return DigestCheck(Verification.KEY_MISSING)
        expected = computed_keyed
    else:
        expected = computed
    if hmac.compare_digest(recorded.encode("utf-8", "replace"), expected.encode("ascii")):
        status = (Verification.UNKEYED if computed_keyed is not None and not keyed
                  else Verification.VERIFIED)
        return DigestCheck(status)
    return DigestCheck(Verification.MISMATCH, (
        f"digest mismatch: the run's events were changed after they were written "
        f"(expected {_short(recorded)}, computed {_short(expected)}"
        + (", or the key differs)" if keyed else ")")))


def digest_verdict(check: DigestCheck, recorded: str | None, *, key_present: bool,
                   old_schema: int | None = None) -> DigestCheck:
    """Whether a run whose digest was checked is clean: THE ONLY PLACE that decides it.

    Every reader of stored runs (audit logs and event files, log records, spans in
    both layouts, :func:`~cupellation.build_report` over decoded events, and any
    store reader to come) passes what :func:`check_digest` found, the digest the
    run recorded (None: none), whether the reader holds a key, and the oldest
    schema below 3 any of the run's lines was written in (None: all current). The
    returned check's ``note``, when set, is listed in the report's ``incomplete``
    (so ``report`` and ``audit --strict`` exit 3); None means clean.

    - A mismatch is never clean.
    - A reader WITH a key accepts only a verified keyed digest: a missing digest,
      a plain ``sha256:`` or ``sha256-columns:`` one (anyone can recompute it), or
      lines in a schema before keyed digests are "not signed with the configured
      key", naming the form found. An attacker without the key could have made
      any of them.
    - A reader WITHOUT a key that meets a keyed digest says so ("signature not
      checked"): it can check neither tampering nor corruption. Listed first in
      ``incomplete`` (so the report's first line says it; docs/decisions.md says
      why this is incomplete rather than a warning).
    - Lines of an older schema inside a run that carries a digest are not covered
      by it: never clean, key or not.
    - Otherwise (no key; a plain digest that matched, or a run with no digest) the
      run is clean as far as its digest goes.
    """
    status = check.status
    if status is Verification.MISMATCH:
        return check if check.note is not None else DigestCheck(
            status, "digest mismatch: the run's events were changed after they were written")
    keyed = recorded is not None and recorded.startswith(_KEYED)
    if key_present and not (keyed and status is Verification.VERIFIED and old_schema is None):
        return DigestCheck(status, f"{UNSIGNED_NOTE}: {_form(recorded, old_schema)}",
                           leading=True)
    if status is Verification.KEY_MISSING:
        return DigestCheck(status, (
            f"{UNCHECKED_NOTE}: the run carries a keyed digest ({_prefix(recorded)}) and no "
            "key is configured here (set CUPELLATION_DIGEST_KEY or pass digest_key=), so "
            "neither tampering nor corruption could be detected"), leading=True)
    if recorded is not None and old_schema is not None:
        return DigestCheck(status, (
            f"lines written in schema {old_schema} are not covered by the run's digest "
            f"({_prefix(recorded)}, which covers schema {_FIRST_DIGEST_SCHEMA} lines only)"))
    return check


def _prefix(digest: str | None) -> str:
    """A digest's form, as its prefix (``hmac-sha256:``), or what stands for one."""
    if digest is None:
        return "no digest"
    prefix, colon, _ = digest.partition(":")
    return f"{prefix[:40]}:" if colon else "an unknown form"


def _form(recorded: str | None, old_schema: int | None) -> str:
    """What a run not signed with the reader's key carries instead."""
    if old_schema is not None:
        return (f"it holds lines written in schema {old_schema}, before keyed digests "
                f"(schema {_FIRST_DIGEST_SCHEMA}), which no digest covers")
    if recorded is None:
        return "it carries no digest"
    if recorded.startswith(_KEYED):  # keyed, yet not verified: cannot happen with a key
        return f"its {_prefix(recorded)} digest was not verified"
    return (f"it carries a plain {_prefix(recorded)} digest, which anyone who can edit "
            "it can recompute")


def _short(digest: str) -> str:
    prefix, _, hexdigits = digest.partition(":")
    return f"{prefix}:{hexdigits[:16]}…" if len(hexdigits) > 16 else digest
