#!/usr/bin/env python3
"""The code's shape, checked so that it stays so (CI runs this):

- inside each crate, modules import each other without a cycle: a module
  imports only modules below it (an import through a re-export counts as
  one of the module defining the name);
- no source file over 500 lines;
- no function over 80 lines.

Tests (`tests/`, `#[cfg(test)]` modules) are left out. Prints each
problem with its place and exits 1 if there is any; `--graph CRATE`
prints that crate's module imports instead, lowest floor first.
"""
import os
import re
import sys

MAX_FILE_LINES = 500
MAX_FN_LINES = 80
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def strip(text):
    """The text with comments, strings and chars blanked (lines kept), and
    `#[cfg(test)]` items cut, so that braces and paths are the code's."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not re.match(r"\w", text[i - 1:i] or " "):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append('""' + re.sub(r"[^\n]", "", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + re.sub(r"[^\n]", "", text[i:j + 1]))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'", text[i:i + 12])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    # Cut `#[cfg(test)]` items: the attribute, then up to the end of the
    # item's braces (or its `;`).
    while True:
        m = re.search(r"#\[cfg\(test\)\]", code)
        if not m:
            return code
        j, depth = m.end(), 0
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            elif code[j] == ";" and depth == 0:
                j += 1
                break
            j += 1
        code = code[:m.start()] + re.sub(r"[^\n]", " ", code[m.start():j]) + code[j:]


def modules(src):
    """Module path (tuple) -> file, for a crate's src folder, following
    `mod` declarations from lib.rs/main.rs."""
    found = {}

    def walk(path, file, folder):
        found[path] = file
        code = strip(open(file).read())
        for m in re.finditer(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+(\w+)\s*;", code, re.M):
            name = m.group(1)
            for cand, sub in ((os.path.join(folder, name + ".rs"), os.path.join(folder, name)),
                              (os.path.join(folder, name, "mod.rs"), os.path.join(folder, name))):
                if os.path.exists(cand):
                    walk(path + (name,), cand, sub)
                    break

    for top in ("lib.rs", "main.rs"):
        f = os.path.join(src, top)
        if os.path.exists(f):
            walk((), f, src)
            break
    return found


def use_paths(tree, prefix=""):
    """A `use` tree's text -> its full paths."""
    tree = tree.strip()
    depth, start = 0, None
    for i, c in enumerate(tree):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}":
            depth -= 1
    if start is None:
        path = re.sub(r"\s+as\s+\w+$", "", tree).strip()
        return [prefix + path] if path else []
    head = tree[:start]
    inner = tree[start + 1:tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for c in inner:
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += c == "{"
        depth -= c == "}"
        cur += c
    parts.append(cur)
    out = []
    for p in parts:
        p = p.strip()
        if p == "self":
            out.append(prefix + head.rstrip(":"))
        elif p:
            out.extend(use_paths(p, prefix + head))
    return out


def graph(src):
    """(modules, edges): edges maps (from, to) -> first line importing."""
    mods = modules(src)
    codes = {p: strip(open(f).read()) for p, f in mods.items()}
    # Each module's re-exports: name -> full path it stands for.
    reexports = {p: {} for p in mods}
    uses = {p: [] for p in mods}
    for p, code in codes.items():
        for m in re.finditer(r"^\s*(pub(?:\([\w:]+\))?\s+)?use\s+([^;]+);", code, re.M):
            line = code[:m.start()].count("\n") + 1
            for path in use_paths(m.group(2)):
                full = absolute(p, path, mods)
                if full is None:
                    continue
                uses[p].append((full, line))
                if m.group(1):
                    reexports[p][full[-1] if full[-1] != "*" else "*" + "::".join(full)] = full
        for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)", code):
            line = code[:m.start()].count("\n") + 1
            full = absolute(p, m.group(1))
            if full is not None:
                uses[p].append((full, line))

    def owner(full, seen=()):
        """The module defining what `full` names."""
        mod = ()
        for i, part in enumerate(full):
            if mod + (part,) in mods:
                mod = mod + (part,)
                continue
            rest = full[i:]
            target = reexports.get(mod, {}).get(part)
            if target and target not in seen and target != full[:i + 1]:
                return owner(target + rest[1:], seen + (target,))
            return mod
        return mod

    edges = {}
    for p in mods:
        for full, line in uses[p]:
            to = owner(full)
            if to != p:
                edges.setdefault((p, to), line)
    return mods, edges



def absolute(module, path, mods=()):
    """A `crate::`/`super::`/`self::` path, or one starting with a child
    module's name, as a tuple from the crate root; None for paths into
    other crates."""
    parts = [x for x in path.split("::") if x]
    if not parts:
        return None
    if tuple(module) + (parts[0],) in mods:
        return tuple(module) + tuple(parts)
    if parts[0] == "crate":
        return tuple(parts[1:])
    if parts[0] in ("super", "self"):
        base = list(module)
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                if not base:
                    return None
                base.pop()
            parts.pop(0)
        return tuple(base + parts)
    return None


def cycles(mods, edges):
    """Strongly connected groups of more than one module (Tarjan)."""
    adj = {p: [] for p in mods}
    for (a, b) in edges:
        if b in adj:
            adj[a].append(b)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in mods:
        if v not in index:
            visit(v)
    return out


def shortest_loops(group, edges):
    """For each module of a cycle group, the shortest way back to itself
    (as a list of modules, first == last); each loop once."""
    inside = set(group)
    adj = {}
    for (a, b) in edges:
        if a in inside and b in inside:
            adj.setdefault(a, []).append(b)
    loops, seen = [], set()
    for start in sorted(group):
        prev, queue = {start: None}, [start]
        found = None
        while queue and not found:
            nxt = []
            for v in queue:
                for w in sorted(adj.get(v, [])):
                    if w == start:
                        found = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found:
                    break
            queue = nxt
        path = [start]
        v = found
        while v is not None and v != start:
            path.append(v)
            v = prev[v]
        path = [start] + path[:0:-1] + [start]
        key = frozenset(zip(path, path[1:]))
        if key not in seen:
            seen.add(key)
            loops.append(path)
    return loops


def name(mod):
    return "::".join(mod) or "crate"


def long_functions(file):
    """(name, first line, lines) of each function over the limit."""
    code = strip(open(file).read())
    lines = code.split("\n")
    out = []
    for i, text in enumerate(lines):
        m = re.match(r"\s*(?:pub(?:\([\w:]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)", text)
        if not m:
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            for c in lines[j]:
                if c == "{":
                    depth += 1
                    started = True
                elif c == "}":
                    depth -= 1
                elif c == ";" and not started and depth == 0:
                    break
            else:
                if started and depth == 0:
                    break
                j += 1
                continue
            break
        if started and j - i + 1 > MAX_FN_LINES:
            out.append((m.group(1), i + 1, j - i + 1))
    return out


def main():
    crates_dir = os.path.join(ROOT, "crates")
    if len(sys.argv) == 3 and sys.argv[1] == "--graph":
        mods, edges = graph(os.path.join(crates_dir, sys.argv[2], "src"))
        for (a, b), line in sorted(edges.items()):
            print(f"{name(a)} -> {name(b)}  ({mods[a]}:{line})")
        return 0
    problems = []
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, "src")
        if not os.path.isdir(src):
            continue
        mods, edges = graph(src)
        for group in cycles(mods, edges):
            for loop in shortest_loops(group, edges):
                steps = " -> ".join(
                    f"{name(a)} ({os.path.relpath(mods[a], ROOT)}:{edges[(a, b)]})"
                    for a, b in zip(loop, loop[1:]))
                problems.append(f"crates/{crate}: import cycle: {steps} -> {name(loop[-1])}")
        for dirpath, _, files in os.walk(src):
            for f in sorted(files):
                if not f.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)
                n = open(path).read().count("\n")
                if n > MAX_FILE_LINES:
                    problems.append(f"{rel}: {n} lines (at most {MAX_FILE_LINES})")
                for fn, line, count in long_functions(path):
                    problems.append(f"{rel}:{line}: fn {fn} is {count} lines (at most {MAX_FN_LINES})")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problems", file=sys.stderr)
        return 1
    print("shape: modules acyclic in every crate, files and functions within bounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
