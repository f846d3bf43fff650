"""The on-disk layout of the SQLite store, and every SQL statement it runs.

Why one module: the statements and the indexes they rely on must change
together, and the test that runs ``EXPLAIN QUERY PLAN`` over every read
statement imports them from here.

Layout:

``log`` — one row per revision, the store's whole history (until compaction):

- ``revision`` INTEGER PRIMARY KEY (the rowid: revision-ordered scans are free);
- ``key`` TEXT, ``value`` BLOB;
- ``created`` 1 if this row created the key, ``deleted`` 1 if it is a delete
  tombstone (a tombstone carries the last value, so a DELETE event can be
  replayed even after the row before it is compacted away);
- ``create_revision`` the revision that created this incarnation of the key;
- ``prev_revision`` the revision of the live row this row replaced (0 for a
  create). Compaction follows it to find superseded rows without a scan.

``meta`` — named integers; ``compacted`` is the revision of the last finished
compaction step, so ``compacted_revision()`` survives a restart.

Invariants:

- revisions are dense and only grow; the newest row is never compacted away
  (compaction only removes rows *below* ``C <= current``), so
  ``MAX(revision)`` is the current revision, also after a restart;
- key order is SQLite's BINARY collation (UTF-8 bytes), which equals Python's
  ``str`` order; a prefix is the half-open range ``[prefix, prefix_end(prefix))``,
  never ``LIKE`` (which cannot use the index and treats ``%``/``_`` as wildcards);
- every read is answered through ``log_key_revision`` or the rowid: no
  statement scans the table (``tests/storage/test_sqlite_specific.py`` checks).
"""

from __future__ import annotations

import sqlite3

__all__ = [
    "SCHEMA",
    "connect",
    "prefix_end",
    "range_clause",
    "GET_AT",
    "NEWEST",
    "INSERT",
    "list_sql",
    "count_sql",
    "replay_sql",
    "COMPACT_SUPERSEDED",
    "COMPACT_TOMBSTONES",
    "SET_META",
    "GET_META",
    "MAX_REVISION",
]

SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    revision        INTEGER PRIMARY KEY,
    key             TEXT    NOT NULL,
    value           BLOB    NOT NULL,
    created         INTEGER NOT NULL,
    deleted         INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    prev_revision   INTEGER NOT NULL
);
-- (key, revision) answers "newest row of a key at R" and prefix ranges in key
-- order; ``deleted`` rides along so count() needs no table lookup.
CREATE INDEX IF NOT EXISTS log_key_revision ON log (key, revision, deleted);
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
"""

_MAX_CHAR = 0x10FFFF


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with ``prefix``
    (None when there is none: the empty prefix, or one made only of U+10FFFF)."""
    stripped = prefix.rstrip(chr(_MAX_CHAR))
    if not stripped:
        return None
    last = ord(stripped[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:  # surrogates cannot be stored as UTF-8
        last = 0xE000
    return stripped[:-1] + chr(last)


def range_clause(alias: str, *, exclusive_start: bool, bounded: bool) -> str:
    """``alias.key`` in ``[lo, hi)`` (or ``(lo, hi)``); the upper bound is left
    out for prefixes without an end (see :func:`prefix_end`)."""
    clause = f"{alias}.key {'>' if exclusive_start else '>='} :lo"
    if bounded:
        clause += f" AND {alias}.key < :hi"
    return clause


def connect(path: str, *, readonly: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL,
    ``synchronous=FULL`` (a COMMIT returns only after the WAL is fsynced)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    if readonly:
        conn.execute("PRAGMA query_only = 1")
    else:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


# The newest row of one key at or below a revision (get, and the writer's checks).
GET_AT = (
    "SELECT revision, value, create_revision, deleted FROM log"
    " WHERE key = :key AND revision <= :rev ORDER BY revision DESC LIMIT 1"
)
NEWEST = (
    "SELECT revision, value, create_revision, deleted FROM log"
    " WHERE key = :key ORDER BY revision DESC LIMIT 1"
)
INSERT = (
    "INSERT INTO log (revision, key, value, created, deleted, create_revision, prev_revision)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
MAX_REVISION = "SELECT COALESCE(MAX(revision), 0) FROM log"
GET_META = "SELECT value FROM meta WHERE name = ?"
SET_META = "INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"

# A live row is visible at :rev if no newer row of the same key is at or below :rev.
_VISIBLE = (
    "l.revision <= :rev AND l.deleted = 0 AND NOT EXISTS ("
    "SELECT 1 FROM log AS n WHERE n.key = l.key AND n.revision > l.revision AND n.revision <= :rev)"
)


def list_sql(*, exclusive_start: bool, bounded: bool) -> str:
    """Keys in a range as of ``:rev``, in key order, at most ``:limit`` rows."""
    return (
        "SELECT l.key, l.value, l.create_revision, l.revision FROM log AS l"
        f" WHERE {range_clause('l', exclusive_start=exclusive_start, bounded=bounded)}"
        f" AND {_VISIBLE} ORDER BY l.key LIMIT :limit"
    )


def count_sql(*, exclusive_start: bool, bounded: bool) -> str:
    """How many keys of a range are live as of ``:rev``."""
    return (
        "SELECT COUNT(*) FROM log AS l"
        f" WHERE {range_clause('l', exclusive_start=exclusive_start, bounded=bounded)}"
        f" AND {_VISIBLE}"
    )


def replay_sql(*, bounded: bool) -> str:
    """Rows of a range with ``:after < revision <= :upto`` in revision order,
    with the value each replaced (NULL for creates or when compacted away)."""
    return (
        "SELECT l.revision, l.key, l.value, l.deleted, l.create_revision, l.prev_revision, p.value"
        " FROM log AS l LEFT JOIN log AS p ON p.revision = l.prev_revision"
        f" WHERE l.revision > :after AND l.revision <= :upto"
        f" AND {range_clause('l', exclusive_start=False, bounded=bounded)}"
        " ORDER BY l.revision LIMIT :limit"
    )


# Compaction of the revision window [:lo, :hi): rows replaced by a row in the
# window, then tombstones in the window. Rows below :lo went in earlier steps.
COMPACT_SUPERSEDED = (
    "DELETE FROM log WHERE revision IN ("
    "SELECT prev_revision FROM log WHERE revision >= :lo AND revision < :hi AND prev_revision > 0)"
)
COMPACT_TOMBSTONES = "DELETE FROM log WHERE revision >= :lo AND revision < :hi AND deleted = 1"
