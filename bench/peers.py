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


def locate_peers(names):
    """[(peer, library path or None for glibc)] for the peers whose library is installed, and
    {peer: why it is missing} for the others."""
    found, missing = [], {}
    for peer in names:
        filename, package = PEERS[peer]
        path = find_library(filename) if filename else None
        if filename and not path:
            missing[peer] = f"{filename} not found (install {package}: scripts/deps.sh)"
            continue
        found.append((peer, path))
    return found, missing


def shown(path):
    """A path relative to the repository when it is inside it."""
    rel = os.path.relpath(path, REPO)
    return path if rel.startswith("..") else rel


def ratio(a, b):
    return a / b if a is not None and b else None


def log(msg):
    print(msg, file=sys.stderr, flush=True)
