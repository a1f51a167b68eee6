#!/usr/bin/env python3
"""Proves that scripts/setup.sh installs everything the build read.

A fresh machine has only what setup.sh installs (with --no-install-recommends)
plus Debian's essential and required packages. A developer machine has more,
so a green build there can hide a missing package (oneDNN's CMake config once
needed OpenCL that only came as a Recommends). This check lists what the build
actually read and maps each file to the Debian package that owns it:

  1. headers: every dependency ninja recorded (`ninja -t deps`);
  2. programs and libraries: every absolute path and `-lNAME` in the build's
     commands (`ninja -t commands`: compilers, code generators, link lines);
  3. CMake package files: the *.cmake files in each `<Pkg>_DIR` cache entry;
  4. the tools and Python modules the tests run (TEST_TOOLS, TEST_MODULES).

Each file must belong to a package in the closure of setup.sh's list under
hard dependencies (Depends/PreDepends only: `apt-cache depends --recurse` with
every other relation switched off) or to an essential/required package. Files
in the source or build tree, /tmp and /usr/local/cuda (the CUDA toolkit is no
Debian package) are exempt. Exit 0 when all is covered, 1 listing each file
that is not (with its owner and a hint), 2 on usage errors.

  check_build_deps.py --source DIR --build DIR [--build DIR...]
                      [--drop PKG]...   # pretend setup.sh lacks PKG (self-test)
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys

# What the tests run besides the build's own outputs (keep in step with
# tests/: e2e scripts, parity harness, namespace tests).
TEST_TOOLS = ["/usr/bin/python3", "ip", "unshare", "timeout", "awk", "sed", "sh", "bash", "gzip", "chromium"]
TEST_MODULES = ["torch", "numpy", "PIL"]
EXEMPT_PREFIXES = ["/usr/local/cuda", "/tmp/", "/proc/", "/dev/"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def setup_packages(script):
    out = run(["bash", script, "--list"])
    return [p for p in out.split() if p]


def closure(packages):
    """Package names reachable by hard dependencies (virtual names included)."""
    out = run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
               "--no-breaks", "--no-replaces", "--no-enhances", *packages])
    names = set()
    for line in out.splitlines():
        if line and not line[0].isspace():
            names.add(line.strip().strip("<>").split(":")[0])
        else:
            m = re.match(r"\s+\|?(?:Pre)?Depends: <?([^ >:]+)", line)
            if m:
                names.add(m.group(1))
    return names


def base_packages():
    """Essential and required packages: on every Debian system by definition."""
    out = run(["dpkg-query", "-W", "-f=${Package} ${Essential} ${Priority}\n"])
    return [f.split()[0] for f in out.splitlines() if " yes " in f + " " or f.endswith(" required")]


def file_owners():
    """path -> packages, from dpkg's file lists (one read instead of a dpkg -S per file)."""
    owners = {}
    for lst in glob.glob("/var/lib/dpkg/info/*.list"):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        with open(lst, encoding="utf-8", errors="replace") as f:
            for path in f:
                owners.setdefault(path.rstrip("\n"), set()).add(pkg)
    return owners


def twins(path):
    """The path and its /lib <-> /usr/lib twin (merged /usr: dpkg knows only one of them)."""
    out = [path]
    for a, b in (("/usr/lib/", "/lib/"), ("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/")):
        if path.startswith(a):
            out.append(b + path[len(a):])
        elif path.startswith(b):
            out.append(a + path[len(b):])
    return out


def owners_of(path, owners):
    """Packages owning the path as named and owning its real path, separately: a
    -dev package's libfoo.so symlink must be covered as well as the library it
    points to. A name no package owns (an alternatives link) defers to its target."""
    named = set().union(*(owners.get(t, set()) for t in twins(os.path.abspath(path))))
    real = set().union(*(owners.get(t, set()) for t in twins(os.path.realpath(path))))
    return [o for o in (named, real) if o]


def ninja_files(build):
    files = {}  # path -> why it was read
    deps = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True).stdout
    target = None
    for line in deps.splitlines():
        if line and not line[0].isspace():
            target = line.split(":")[0]
        elif line.strip():
            p = line.strip()
            files.setdefault(p if os.path.isabs(p) else os.path.normpath(os.path.join(build, p)), "header of " + str(target))
    cache = read_cache(build)
    launchers = {cache.get(k) for k in ("CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_C_COMPILER_LAUNCHER")} - {None, ""}
    cmds = subprocess.run(["ninja", "-C", build, "-t", "commands"], capture_output=True, text=True).stdout
    for cmd in cmds.splitlines():
        try:
            words = shlex.split(cmd)
        except ValueError:
            words = cmd.split()
        libdirs = [w[2:] for w in words if w.startswith("-L")]
        for w in words:
            for tok in re.split(r"[:=,]", w) if w.startswith("-") or ":" in w else [w]:
                if tok.startswith("/") and os.path.exists(tok) and not os.path.isdir(tok):
                    if os.path.basename(tok) not in {os.path.basename(l) for l in launchers} and tok not in launchers:
                        files.setdefault(tok, "named in a build command")
            if w.startswith("-l") and len(w) > 2:
                lib = find_lib(w[2:], libdirs)
                if lib:
                    files.setdefault(lib, "linked as " + w)
        if words and not words[0].startswith("/") and words[0] not in (":", "cd", "&&") and words[0] not in launchers:
            exe = which(words[0])
            if exe:
                files.setdefault(exe, "program run by the build")
    for key, value in cache.items():
        if key.endswith("_DIR") and os.path.isdir(value):
            for f in glob.glob(os.path.join(value, "*.cmake")):
                files.setdefault(f, "CMake package file (" + key + ")")
    return files


def read_cache(build):
    cache = {}
    path = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(path):
        for line in open(path, encoding="utf-8", errors="replace"):
            m = re.match(r"([A-Za-z0-9_.+-]+):[A-Z]+=(.*)", line.rstrip("\n"))
            if m:
                cache[m.group(1)] = m.group(2)
    return cache


def find_lib(name, libdirs):
    for d in libdirs:
        for ext in (".so", ".a"):
            p = os.path.join(d, "lib" + name + ext)
            if os.path.exists(p):
                return p
    for ext in (".so", ".a"):
        out = subprocess.run(["c++", "-print-file-name=lib" + name + ext], capture_output=True, text=True).stdout.strip()
        if os.path.isabs(out) and os.path.exists(out):
            return out
    return None


def which(tool):
    if os.path.isabs(tool):
        return tool if os.path.exists(tool) else None
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        p = os.path.join(d, tool)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def test_files():
    files = {}
    for tool in TEST_TOOLS:
        p = which(tool)
        files[p or "(missing) " + tool] = "tool the tests run: " + tool
    for mod in TEST_MODULES:
        out = subprocess.run(["/usr/bin/python3", "-c", "import %s; print(%s.__file__)" % (mod, mod)],
                             capture_output=True, text=True)
        files[out.stdout.strip() if out.returncode == 0 else "(missing) python3 module " + mod] = \
            "Python module the tests import: " + mod
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", action="append", required=True)
    ap.add_argument("--drop", action="append", default=[], help="pretend setup.sh does not install PKG")
    ap.add_argument("--setup", help="read the package list from this setup.sh instead of the tree's")
    a = ap.parse_args()
    source = os.path.realpath(a.source)
    listed = [p for p in setup_packages(a.setup or os.path.join(source, "scripts/setup.sh")) if p not in a.drop]
    allowed = closure(listed) | set(base_packages())
    owners = file_owners()
    files = {}
    builds = [os.path.realpath(b) for b in a.build if os.path.exists(os.path.join(b, "build.ninja"))]
    if not builds:
        print("check_build_deps: no built tree among " + ", ".join(a.build), file=sys.stderr)
        return 2
    for b in builds:
        files.update(ninja_files(b))
    files.update(test_files())
    problems = []
    files = {os.path.normpath(p) if not p.startswith("(") else p: w for p, w in files.items()}
    for path, why in sorted(files.items()):
        if path.startswith("(missing)"):
            problems.append("%s is not installed (%s)" % (path[10:], why))
            continue
        real = os.path.realpath(path)
        if any(real.startswith(t + "/") or real == t for t in [source] + builds) or \
                any(real.startswith(e) or path.startswith(e) for e in EXEMPT_PREFIXES):
            continue
        found = owners_of(path, owners)
        if not found:
            problems.append("%s (%s) belongs to no Debian package: installed by hand?" % (path, why))
        for pkgs in {frozenset(f) for f in found}:
            if not pkgs & allowed:
                problems.append("%s (%s) comes from %s, which scripts/setup.sh neither installs nor hard-depends on"
                                % (path, why, " or ".join(sorted(pkgs))))
    print("check_build_deps: %d files read by the build and tests, %d setup packages, %d packages in their closure"
          % (len(files), len(listed), len(allowed)))
    for p in problems:
        print("  missing: " + p)
    if problems:
        owners_missing = sorted({m.group(1) for p in problems for m in [re.search(r"comes from ([^ ,]+)", p)] if m})
        if owners_missing:
            print("hint: add to scripts/setup.sh: " + " ".join(owners_missing))
        print("deps: 0 passed, 1 failed")
        return 1
    print("deps: 1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
