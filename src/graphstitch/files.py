"""Writing files the user owns: atomically, keeping their mode, owner and symlinks.

Every file graphstitch writes (reports, baselines, patched sources and their backups) goes
through :func:`atomic_write`. A reader never sees half a file; a file that exists keeps its
permission bits and (where the OS lets us) its owner; a symlink stays a symlink and its
target gets the new content; a new file gets the mode the user's umask gives. A read-only
or immutable file is refused with one line and nothing is left behind.

Also reading and parsing Python sources. No torch here; nothing above the standard library.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import errno
import functools
import hashlib
import io
import os
import stat
import tempfile
import threading
import tokenize
from dataclasses import dataclass
from pathlib import Path


class WriteRefused(Exception):
    """A write graphstitch will not do (read-only, immutable, no permission); one line."""


def file_hash(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_writable(path: str | os.PathLike[str]) -> None:
    """Raise WriteRefused when PATH exists and must not be replaced: no write permission bit
    (also for root: a 0444 file is the user saying "don't"), or the OS refuses a write
    (immutable, read-only mount). Opening for append changes nothing, not even mtime."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return
    except OSError as e:
        raise WriteRefused(f"cannot inspect {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise WriteRefused(f"{path} is not a regular file; not writing it")
    if not st.st_mode & 0o222:
        raise WriteRefused(f"{path} is read-only (mode {stat.S_IMODE(st.st_mode):o}); not writing it")
    try:
        os.close(os.open(real, os.O_WRONLY | os.O_APPEND))
    except OSError as e:
        raise WriteRefused(f"{path} cannot be written ({e.strerror}); not writing it") from None


def check_folder(folder: str | os.PathLike[str]) -> None:
    """Raise WriteRefused unless FOLDER exists and a file can be created in it: a folder with
    no write bit (also for root, as for files), no permission, or on a read-only mount."""
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        raise WriteRefused(f"folder {folder} does not exist") from None
    except OSError as e:
        raise WriteRefused(f"cannot inspect folder {folder}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise WriteRefused(f"{folder} is not a folder")
    if not st.st_mode & 0o222 or not os.access(folder, os.W_OK | os.X_OK):
        raise WriteRefused(f"folder {folder} is not writable (mode {stat.S_IMODE(st.st_mode):o})")
    with contextlib.suppress(OSError):
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            raise WriteRefused(f"folder {folder} is on a read-only file system")


def atomic_write(path: str | os.PathLike[str], text: str | bytes) -> None:
    """Replace PATH's content with TEXT atomically (temp file beside the real file + rename).

    Raises WriteRefused (one line) instead of writing where check_writable says no, or when
    the folder cannot take the temp file; the temp file never outlives a failure.
    """
    check_writable(path)
    real = Path(os.path.realpath(path))  # through symlinks: the link stays, its target changes
    if not real.parent.is_dir():  # never made silently: a typo in a path is not a new folder
        raise WriteRefused(f"cannot write {path}: folder {real.parent} does not exist")
    try:
        old = os.stat(real) if real.exists() else None
        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    except OSError as e:
        raise WriteRefused(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            f.flush()
            if old is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
                with contextlib.suppress(PermissionError):  # only root may give files away
                    os.fchown(f.fileno(), old.st_uid, old.st_gid)
            else:
                os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, real)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if e.errno in (errno.EPERM, errno.EACCES, errno.EROFS):
            raise WriteRefused(f"cannot write {path}: {e.strerror}") from None
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    # os.umask can only be read by setting it; do it on a throwaway file instead (thread-safe).
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "probe")
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o777))
        return 0o777 & ~stat.S_IMODE(os.stat(p).st_mode)


# ----------------------------------------------------------------------------- Python sources

@dataclass(frozen=True)
class SourceFormat:
    """How a Python file is stored: its encoding (PEP 263 coding line or BOM), its line
    endings. Patches are made on text with ``\\n`` endings and stored back in this format,
    so a patched file keeps what the user chose (tabs and the final newline are the text's
    own and survive as they are)."""
    encoding: str = "utf-8"
    bom: bool = False
    newline: str = "\n"


def read_source(path: str | os.PathLike[str]) -> tuple[str, SourceFormat]:
    """A Python file's text (``\\n`` line endings) and its format. Raises OSError, or
    SyntaxError for a file Python itself could not decode (one line)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as e:
        raise SyntaxError(f"{path}: cannot decode as Python source ({str(e).splitlines()[0][:120]})") from None
    bom = encoding == "utf-8-sig"
    if bom:
        text = text.removeprefix("\ufeff")
        encoding = "utf-8"
    newline = "\r\n" if "\r\n" in text else ("\r" if "\r" in text else "\n")
    return text.replace("\r\n", "\n").replace("\r", "\n"), SourceFormat(encoding, bom, newline)


def source_text(path: str | os.PathLike[str]) -> str:
    """A Python file's text, ``\\n`` line endings (see :func:`read_source`)."""
    return read_source(path)[0]


def line_map(old: str, new: str) -> dict[int, int]:
    """New line number -> old line number for lines the patch did not touch."""
    sm = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    out: dict[int, int] = {}
    for tag, i1, i2, j1, _ in sm.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                out[j1 + k + 1] = i1 + k + 1
    return out


# CPython before 3.12.4 keeps ast.parse's recursion count in interpreter-wide state: a
# thread switch inside the AST conversion (a finalizer that runs Python code) while another
# thread parses raises "SystemError: AST constructor recursion depth mismatch" (CPython
# gh-106905; a `sweep -j 2` hit it). Sweeps and fix trials parse in threads: every parse
# graphstitch does takes this lock. Reentrant, for a parse inside a finalizer.
_PARSE_LOCK = threading.RLock()


def parse_python(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, safe beside other threads that parse."""
    with _PARSE_LOCK:
        return ast.parse(text, filename)


def encode_source(text: str, fmt: SourceFormat) -> bytes:
    """TEXT (``\\n`` endings) stored in FMT. Raises UnicodeEncodeError when a patch added a
    character the file's encoding cannot hold."""
    body = text.replace("\n", fmt.newline) if fmt.newline != "\n" else text
    return (b"\xef\xbb\xbf" if fmt.bom else b"") + body.encode(fmt.encoding)


# What reads the wall or CPU clock: `time.time()`, `perf_counter()` imported from time,
# `datetime.now()`, `timeit.default_timer()`.
_CLOCK_CALLS = frozenset({"time", "perf_counter", "monotonic", "process_time", "time_ns", "perf_counter_ns",
                          "monotonic_ns", "process_time_ns", "default_timer"})
_CLOCK_MODULES = frozenset({"time", "timeit"})


def reads_clock(path: str, line: int) -> bool:
    """Whether the innermost function holding LINE of PATH reads a clock itself. What it
    prints may then be a duration (SwAV's meters, `int(n / (time.time() - t0))`), which no
    two runs share: eager may print the same numbers every time and the compiled side other
    ones every time (a slower step), so re-running cannot tell a clock from a fault. What it
    computes from one may also take another branch, or make Dynamo specialise on another
    int, in each run: the clock is the one input that neither the factory nor a seed fixes."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    spans = _clock_spans(path, st.st_mtime_ns, st.st_size)
    inner = [(a, b, clock) for a, b, clock in spans if a <= line <= b]
    return bool(inner) and max(inner, key=lambda t: t[0])[2]


@functools.lru_cache(maxsize=256)
def _clock_spans(path: str, _mtime: int, _size: int) -> list[tuple[int, int, bool]]:
    """(first line, last line, reads a clock) of each function of PATH."""
    try:
        tree = parse_python(source_text(path), path)   # the file's own encoding (PEP 263, BOM)
    except (OSError, SyntaxError, ValueError):
        return []
    names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             and n.module in _CLOCK_MODULES for a in n.names if a.name in _CLOCK_CALLS}

    def clock(c: ast.Call) -> bool:
        fn = c.func
        if isinstance(fn, ast.Name):
            return fn.id in names
        if isinstance(fn, ast.Attribute):
            base = fn.value.attr if isinstance(fn.value, ast.Attribute) else getattr(fn.value, "id", None)
            return (fn.attr in _CLOCK_CALLS and base in _CLOCK_MODULES) or \
                (fn.attr in ("now", "utcnow", "today") and base == "datetime")
        return False
    return [(n.lineno, n.end_lineno or n.lineno, any(isinstance(c, ast.Call) and clock(c) for c in ast.walk(n)))
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
