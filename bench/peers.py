"""What the scripts that preload each malloc into a program share (bench/pattern_ratios.py,
bench/thread_scaling.py): the peers, where their libraries are, and small helpers.

Imported as a sibling module: each script runs as `/usr/bin/python3 bench/<script>.py`, which
puts bench/ on the module path.
"""

import glob
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each peer: its library file (None: glibc's own malloc, no preload) and the Debian package that
# has it (scripts/deps.sh installs them).
PEERS = {
    "glibc": (None, "libc6"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc2"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    "mimalloc": ("libmimalloc.so.2", "libmimalloc2.0"),
}


def find_library(filename):
    """The first existing path of a shared library in the usual library folders, or None."""
    for pattern in ("/usr/lib/*/", "/usr/lib/", "/lib/*/", "/usr/local/lib/"):
        for path in sorted(glob.glob(pattern + filename)):
            if os.path.exists(path):
                return path
    return None


def locate_peers(names, extra=None):
    """[(peer, library path or None for glibc)] for the peers whose library is installed, and
    {peer: why it is missing} for the others. extra: {name: library} of the peers that are not
    Debian's (extra_peers)."""
    found, missing = [], {}
    for peer in names:
        if extra and peer in extra:
            found.append((peer, extra[peer]))
            continue
        filename, package = PEERS[peer]
        path = find_library(filename) if filename else None
        if filename and not path:
            missing[peer] = f"{filename} not found (install {package}: scripts/deps.sh)"
            continue
        found.append((peer, path))
    return found, missing


# The strongest allocators of today, which Debian does not package in a recent version:
# ../shared/peers/build.sh builds them from source archives into build/peers (scripts that take
# peers add them when they are there, as if named with --peer).
STRONG_PEERS = {
    "snmalloc": "libsnmalloc.so",
    "mimalloc3": "libmimalloc3.so",
}
STRONG_PEERS_DIR = os.path.join(REPO, "build", "peers")


def add_peer_option(ap):
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=LIB",
                    help="another allocator's LD_PRELOAD library (repeatable); snmalloc and "
                         "mimalloc 3 are added from build/peers when ../shared/peers/build.sh "
                         "built them there (--no-strong-peers leaves them out)")
    ap.add_argument("--no-strong-peers", action="store_true",
                    help="leave out the peers of build/peers")


def extra_peers(args):
    """[(name, absolute library path)]: the strong peers built in build/peers (unless
    --no-strong-peers), then each --peer NAME=LIB. Exits with a message naming a bad --peer."""
    out = []
    if not args.no_strong_peers:
        for name, filename in STRONG_PEERS.items():
            path = os.path.join(STRONG_PEERS_DIR, filename)
            if os.path.exists(path):
                out.append((name, path))
    for spec in args.peer:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            sys.exit(f"--peer {spec!r}: expected NAME=LIBRARY")
        if not os.path.isfile(path):
            sys.exit(f"--peer {spec!r}: {path} is not a file")
        out = [(n, p) for n, p in out if n != name] + [(name, os.path.abspath(path))]
    return out


def shown(path):
    """A path relative to the repository when it is inside it."""
    rel = os.path.relpath(path, REPO)
    return path if rel.startswith("..") else rel


def ratio(a, b):
    return a / b if a is not None and b else None


def log(msg):
    print(msg, file=sys.stderr, flush=True)
