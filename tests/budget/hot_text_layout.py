#!/usr/bin/python3
"""hot_text_layout.py - checks that libslabkit-malloc.so was linked with its hot functions first
(SLABKIT_HOT_TEXT, tools/hot_text.py): the functions cmake/slabkit-malloc.order names lie
together at the start of the library's code, in one span little larger than they are, so that a
preloaded process maps one or two 64 KiB windows of the library's code instead of all of them.

usage: hot_text_layout.py --malloc-lib <libslabkit-malloc.so> --order <slabkit-malloc.order>
Exit status 0 when the layout holds, 1 (with what is wrong) when not.
"""
import argparse
import subprocess
import sys


def functions(lib):
    """(address, size, name) of every function the library defines, by address."""
    nm = subprocess.run(["nm", "-S", "--defined-only", lib], capture_output=True, text=True,
                        check=True).stdout
    out = []
    for line in nm.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "tTwW":
            out.append((int(p[0], 16), int(p[1], 16), p[3]))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--malloc-lib", required=True)
    ap.add_argument("--order", required=True)
    args = ap.parse_args()
    order = {line.strip() for line in open(args.order) if line.strip()}
    fns = functions(args.malloc_lib)
    hot = [(a, s, n) for a, s, n in fns if n in order]
    if len(hot) < len(order) // 2:
        sys.exit(f"hot_text_layout: the library defines only {len(hot)} of the {len(order)} "
                 f"functions {args.order} names: refresh it (tools/hot_text.py)")
    lo = min(a for a, _, _ in hot)
    hi = max(a + s for a, s, _ in hot)
    hot_bytes = sum(s for _, s, _ in hot)
    span = hi - lo
    text_lo = fns[0][0]
    text_hi = max(a + s for a, s, _ in fns)
    # Functions that share a section with a listed one (a destructor's aliases, a local alias of
    # operator delete) come along with it; anything more means the order was not applied.
    strangers = sum(s for a, s, n in fns if n not in order and lo <= a < hi)
    print(f"hot_text_layout: {len(hot)} listed functions, {hot_bytes} bytes, span "
          f"{lo:#x}-{hi:#x} ({span} bytes; {strangers} bytes of others inside) in code "
          f"{text_lo:#x}-{text_hi:#x} ({text_hi - text_lo} bytes)")
    problems = []
    if span > hot_bytes * 5 // 4:
        problems.append(f"the listed functions spread over {span} bytes for {hot_bytes} of "
                        f"their own: the link did not order them")
    if lo - text_lo > 64 * 1024:
        problems.append(f"the listed functions start {lo - text_lo} bytes into the code, not "
                        f"at its start")
    if strangers > span // 10:
        problems.append(f"{strangers} bytes of other functions sit among the listed ones")
    for p in problems:
        print(f"hot_text_layout: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
