#!/usr/bin/env python3
"""Import circles between the .rs files of each crate (run from the repository root; exits 1 when
there is one): an edge a -> b when a names a path
(`use`, or a qualified path in code) that resolves to b's module. Parent-child `mod` declarations
are not imports."""
import re, subprocess, sys, os
from collections import defaultdict

files = [f for f in subprocess.check_output(['git', 'ls-files', '*.rs']).decode().split() if os.path.exists(f)]

def crate_root(f):
    parts = f.split('/')
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == 'src':
            return '/'.join(parts[:i + 1])
    return None

def module_of(f, root):
    rel = f[len(root) + 1:][:-3]
    parts = rel.split('/')
    if parts[-1] in ('mod', 'lib', 'main'):
        parts = parts[:-1]
    if parts and parts[0] == 'bin':
        return None
    return tuple(parts)

mods = {}
for f in files:
    r = crate_root(f)
    if not r:
        continue
    m = module_of(f, r)
    if m is None:
        continue
    mods[(r, m)] = f

edges = defaultdict(set)
path_re = re.compile(r'\b((?:crate|super|self)(?:::(?:super|\w+))*)')
for (r, m), f in mods.items():
    text = open(f).read()
    # cut `#[cfg(test)] mod tests { ... }` inline blocks? keep: they import parents, harmless
    text = re.sub(r'//[^\n]*', '', text)
    paths = [mt.group(1) for mt in path_re.finditer(text)]
    for mt in re.finditer(r'\b((?:crate|super|self)(?:::(?:super|\w+))*)::\{([^}]*)\}', text):
        for item in mt.group(2).split(','):
            item = item.strip().split(' as ')[0]
            if item and item != 'self':
                paths.append(mt.group(1) + '::' + item.replace('{', '').strip())
    for pth in paths:
        segs = [x for x in pth.split('::') if x]
        cur = list(m) if not f.endswith(('mod.rs', 'lib.rs', 'main.rs')) else list(m)
        # module path of the file itself
        if segs[0] == 'crate':
            cur = []; segs = segs[1:]
        elif segs[0] == 'self':
            segs = segs[1:]
        while segs and segs[0] == 'super':
            cur = cur[:-1]; segs = segs[1:]
        # resolve longest prefix that is a module file
        target = None
        for k in range(len(segs), -1, -1):
            cand = tuple(cur + segs[:k])
            if (r, cand) in mods:
                target = cand; break
        if target is not None and target != m:
            # ignore importing own descendants (declared children) only if child is declared here
            edges[(r, m)].add((r, target))

# inline test modules importing super are within the same file; child file tests.rs importing parent
# is an edge child->parent; parent->child edges come from `use child::X`.
index = {}; low = {}; stack = []; on = set(); res = []; idx = [0]
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = idx[0]; idx[0] += 1; stack.append(v); on.add(v)
    for w in edges.get(v, ()):
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1:
            res.append(comp)
for v in list(mods):
    if v not in index:
        strong(v)
for comp in res:
    print('circle:', ' <-> '.join(sorted(mods[c] for c in comp)))
print(len(res), 'import circles between files')
sys.exit(1 if res else 0)
