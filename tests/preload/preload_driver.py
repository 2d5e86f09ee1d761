#!/usr/bin/python3
"""Runs a real program under the preloaded malloc replacement and checks it.

Always run with Debian's /usr/bin/python3 (the python3 first on PATH may be another build).

  preload_driver.py --lib LIB --design D [options] -- PROGRAM ARGS...

Steps:
 1. Interposition check: a tiny /usr/bin/python3 process under the same preload and design
    checks that LIB is mapped, that LIB defines each required symbol (malloc, free, ...,
    operator new/delete) and that the global lookup (dlsym(RTLD_DEFAULT)) finds LIB's
    definition, not glibc's (or, for a function whose address the non-PIE python3 takes, the
    executable's PLT entry, which is bound by the same lookup). Then it calls malloc and free.
 2. Unless --preload-only: the reference run on the system allocator (no LD_PRELOAD).
 3. The run under the preload (LD_PRELOAD=LIB, SLABKIT_ALLOCATOR=D).
 4. Both runs must exit 0 (no signal, no timeout) and print the same stdout, byte for byte.
    stderr is never compared (SLABKIT_STATS=exit writes a table there); --expect-stderr checks
    that the preloaded run's stderr contains a text.

The reference run gets no SLABKIT_* setting; the preloaded runs keep the caller's (say
SLABKIT_FAKE_NUMA=2), except SLABKIT_CONTINUE_ON_ERROR, and get SLABKIT_ALLOCATOR=D and the
--preload-env settings.

Each run gets a fresh, empty working directory at the same path (so that paths in the output,
e.g. a compiler's DW_AT_comp_dir, do not differ), also used as TMPDIR.
"""

import argparse
import ctypes  # noqa: F401  (fail early here rather than in the check child)
import difflib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The interposition check, run as /usr/bin/python3 -c under the preload. argv: lib, symbols...
CHECK_CODE = r"""
import ctypes, os, sys
lib = os.path.realpath(sys.argv[1])
exe = os.path.realpath('/proc/self/exe')
lib_maps, exe_maps = [], []
with open('/proc/self/maps') as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = os.path.realpath(parts[5].strip())
        lo, hi = (int(x, 16) for x in parts[0].split('-'))
        if path == lib:
            lib_maps.append((lo, hi))
        elif path == exe:
            exe_maps.append((lo, hi))
if not lib_maps:
    print('preload check: %s is not mapped in the process' % lib)
    sys.exit(2)
def inside(addr, maps):
    return any(lo <= addr < hi for lo, hi in maps)
dl = ctypes.CDLL(None)
dl.dlsym.restype = ctypes.c_void_p
dl.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
own = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD | os.RTLD_NOW)  # already loaded: the preload
bad = []
for name in sys.argv[2:]:
    in_lib = dl.dlsym(own._handle, name.encode())
    seen = dl.dlsym(None, name.encode())  # RTLD_DEFAULT: the definition the program gets
    if not in_lib or not inside(in_lib, lib_maps):
        bad.append('%s: not defined by %s' % (name, lib))
    elif seen != in_lib and not inside(seen or 0, exe_maps):
        # A non-PIE executable that takes a function's address makes its PLT entry the
        # function's address; otherwise the global lookup must find the preload's definition.
        bad.append('%s: resolves to 0x%x, not to %s' % (name, seen or 0, lib))
# A few calls through the interposed functions.
dl.malloc.restype = ctypes.c_void_p
dl.malloc.argtypes = [ctypes.c_size_t]
dl.free.argtypes = [ctypes.c_void_p]
ptrs = [dl.malloc(n) for n in (1, 24, 1000, 70000, 5 << 20)]
if not all(ptrs):
    bad.append('malloc returned NULL')
for p in ptrs:
    dl.free(p)
if bad:
    print('preload check failed:\n  ' + '\n  '.join(bad))
    sys.exit(3)
print('preload check: ok (%d symbols from %s)' % (len(sys.argv) - 2, lib))
"""

ALWAYS_REQUIRED = ['malloc', 'free', 'calloc', 'realloc']


def log(msg):
    print(msg, flush=True)


def base_env(extra):
    """The environment of both runs: ours, without any preload or slabkit setting inherited
    from the caller, plus the --env settings."""
    env = {k: v for k, v in os.environ.items()
           if k != 'LD_PRELOAD' and not k.startswith('SLABKIT_')}
    env.update(extra)
    return env


def inherited_slabkit_env():
    """The caller's SLABKIT_* settings, which the preloaded runs keep (e.g. SLABKIT_FAKE_NUMA=2
    ctest -L preload), except SLABKIT_CONTINUE_ON_ERROR: a bad free must abort here."""
    return {k: v for k, v in os.environ.items()
            if k.startswith('SLABKIT_') and k != 'SLABKIT_CONTINUE_ON_ERROR'}


def run(cmd, env, cwd, stdin_path, timeout):
    """Runs cmd in its own session; returns (rc, stdout, stderr, seconds, timed_out)."""
    start = time.monotonic()
    stdin = open(stdin_path, 'rb') if stdin_path else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)  # the process group we started
            out, err = proc.communicate()
    finally:
        if stdin_path:
            stdin.close()
    return proc.returncode, out, err, time.monotonic() - start, timed_out


def describe_status(rc, timed_out, timeout):
    if timed_out:
        return 'timed out after %ds' % timeout
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = 'signal %d' % -rc
        return 'killed by %s' % name
    return 'exit status %d' % rc


def tail(data, limit=4000):
    text = data.decode('utf-8', 'replace')
    return text if len(text) <= limit else '[...]\n' + text[-limit:]


def show_diff(ref, got):
    log('stdout differs: reference %d bytes, preloaded %d bytes' % (len(ref), len(got)))
    first = next((i for i, (a, b) in enumerate(zip(ref, got)) if a != b), min(len(ref), len(got)))
    log('first difference at byte %d (line %d)' % (first, ref[:first].count(b'\n') + 1))
    try:
        a = ref.decode('utf-8').splitlines()
        b = got.decode('utf-8').splitlines()
    except UnicodeDecodeError:
        log('(binary output)')
        return
    diff = list(difflib.unified_diff(a, b, 'system allocator', 'preloaded', lineterm='', n=2))
    for line in diff[:60]:
        log(line[:300])
    if len(diff) > 60:
        log('[... %d more diff lines]' % (len(diff) - 60))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--lib', required=True, help='the preload library')
    ap.add_argument('--design', required=True, help='SLABKIT_ALLOCATOR for the preloaded run')
    ap.add_argument('--name', default='program')
    ap.add_argument('--env', action='append', default=[], metavar='K=V',
                    help='setting for both runs')
    ap.add_argument('--preload-env', action='append', default=[], metavar='K=V',
                    help='setting for the preloaded run only')
    ap.add_argument('--require', default='',
                    help='comma-separated symbols that must resolve into LIB '
                         '(malloc, free, calloc, realloc always)')
    ap.add_argument('--stdin', help='file fed to the program on stdin')
    ap.add_argument('--preload-only', action='store_true',
                    help='no reference run; the program checks itself (exit 0)')
    ap.add_argument('--expect-stderr', action='append', default=[], metavar='TEXT',
                    help="text that the preloaded run's stderr must contain")
    ap.add_argument('--timeout', type=int, default=120, help='seconds per run')
    ap.add_argument('--show-stdout', action='store_true',
                    help="print the preloaded run's stdout")
    ap.add_argument('cmd', nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == '--' else args.cmd
    if not cmd:
        ap.error('no program given')

    lib = os.path.realpath(args.lib)
    if not os.path.isfile(lib):
        log('FAIL: preload library %s does not exist (not built?)' % lib)
        return 1

    def pairs(items):
        return dict(item.split('=', 1) for item in items)

    env = base_env(pairs(args.env))
    penv = dict(env, **inherited_slabkit_env())
    penv.update(LD_PRELOAD=lib, SLABKIT_ALLOCATOR=args.design)
    penv.update(pairs(args.preload_env))

    top = tempfile.mkdtemp(prefix='slabkit-preload-%s-' % args.name)
    work = os.path.join(top, 'work')
    failures = []
    try:
        # 1. The preload must take, and serve the required symbols.
        symbols = ALWAYS_REQUIRED + [s for s in args.require.split(',')
                                     if s and s not in ALWAYS_REQUIRED]
        check_env = dict(penv)
        check_env.pop('SLABKIT_STATS', None)
        rc, out, err, secs, to = run(['/usr/bin/python3', '-c', CHECK_CODE, lib] + symbols,
                                     check_env, top, None, 60)
        log(out.decode('utf-8', 'replace').rstrip())
        if rc != 0 or to:
            log('FAIL: interposition check: %s' % describe_status(rc, to, 60))
            log(tail(err))
            return 1

        # 2. and 3. The runs.
        runs = []
        plan = [] if args.preload_only else [('system allocator', env)]
        plan.append(('preloaded %s' % args.design, penv))
        for label, run_env in plan:
            shutil.rmtree(work, ignore_errors=True)
            os.mkdir(work)
            run_env = dict(run_env, TMPDIR=work)
            rc, out, err, secs, to = run(cmd, run_env, work, args.stdin, args.timeout)
            status = describe_status(rc, to, args.timeout)
            log('%s run: %s, %.2f s, stdout %d bytes, stderr %d bytes'
                % (label, status, secs, len(out), len(err)))
            if rc != 0 or to:
                failures.append('%s run: %s' % (label, status))
                log('--- stderr of the %s run (tail) ---' % label)
                log(tail(err))
                log('--- stdout of the %s run (tail) ---' % label)
                log(tail(out, 2000))
            runs.append((label, out, err))

        # 4. Compare and check.
        label, out, err = runs[-1]
        if (args.show_stdout or args.preload_only) and not failures:
            log('--- stdout of the %s run ---' % label)
            log(tail(out))
        if not args.preload_only and not failures:
            if runs[0][1] != out:
                show_diff(runs[0][1], out)
                failures.append('stdout differs from the system allocator run')
            else:
                log('stdout identical (%d bytes)' % len(out))
        missing = [text for text in args.expect_stderr if text.encode() not in err]
        for text in missing:
            failures.append('preloaded stderr lacks %r' % text)
        if args.expect_stderr:
            log('--- stderr of the %s run (tail) ---' % label)
            log(tail(err))
        if not args.expect_stderr and not args.preload_only and err != runs[0][2]:
            # Not a failure (stderr is not compared), but worth seeing in the log.
            log('note: stderr of the preloaded run differs from the reference run\'s:')
            log(tail(err, 2000))
    finally:
        shutil.rmtree(top, ignore_errors=True)

    if failures:
        log('FAIL %s: %s' % (args.name, '; '.join(failures)))
        return 1
    log('PASS %s' % args.name)
    return 0


if __name__ == '__main__':
    sys.exit(main())
