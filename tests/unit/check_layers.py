#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""
The layer boundaries of rmx, checked from the built objects and the sources
(docs/architecture.md, "Layers"):

1. src/base references nothing of rmx outside src/base.
2. A transport (transport/<name>/) references no rmx symbol outside src/base
   and its own folder, and includes no rmx header outside src/base,
   transport/transport.h, its own folder and include/rmx (read from its
   sources, and from its depfiles where the generator keeps them). One
   exception, one way (BUILDS_ON): shm runs the TCP transport's stream
   engine over its channel, so transport/shm may use transport/tcp.
3. The core (src/, outside base) reaches a transport only through the
   registry: no core object but src/registry references a transport symbol.
4. A core file calls by name only files of its own folder or of a lower
   rank (RANK below): every call upwards goes through an upcall or an op
   class. No call cycle joins more than two files. (An arrow A -> B
   wherever A's object references, weakly or not, a symbol B defines.)
5. Examples, bench and the conformance suite include only <rmx/rmx.h>,
   <uv.h>, system headers and headers of their own folder; only the fault
   shims (tests/conformance/fault_*.c) and rmx-xfer's ibv_reg_mr
   comparison (bench/xfer_ibv.c) include rdma-core's.
6. No C source or header of the project is longer than 600 lines: a file
   that grows past that holds more than one object.

usage: check_layers.py SOURCE_DIR OBJECT...
Exit 0 when every rule holds; else one line per breach and exit 1.
"""
import os
import re
import subprocess

# The one transport that builds on another (rule 2).
BUILDS_ON = {'transport/shm': 'transport/tcp'}
import sys

src_dir = os.path.realpath(sys.argv[1])
objects = [o for arg in sys.argv[2:] for o in arg.split(";") if o]
breaches = []


def rel_source(obj):
    """transport/tcp/tcp.c.o -> transport/tcp/tcp (the path under .dir/)."""
    path = obj.split('.dir/', 1)[1]
    return path[:-len('.c.o')] if path.endswith('.c.o') else path[:-2]


def layer(name):
    parts = name.split('/')
    if parts[0] == 'transport':
        return 'transport/' + parts[1]
    if parts[0] == 'src' and len(parts) > 2:
        return 'src/' + parts[1]
    if name == 'src/registry':
        return name  # names the transports and nothing of the core
    return 'src'  # the top of the core: context, rpc, rma, devices


# The core's layers, bottom up (docs/architecture.md).
RANK = {'src/base': 0, 'src/registry': 1, 'src/mem': 1, 'src/rt': 2, 'src/msg': 3, 'src/conn': 4,
        'src/xfer': 4, 'src': 5, 'src/meta': 6}


defs, refs = {}, {}
for obj in objects:
    name = rel_source(obj)
    out = subprocess.run(['nm', '-P', obj], capture_output=True, text=True, check=True).stdout
    refs[name] = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        if f[1] in ('U', 'w', 'v'):  # undefined, strong or weak
            refs[name].add(f[0])
        elif f[1] in 'TDBRVWC':
            defs[f[0]] = name

edges = {n: set() for n in refs}
for a, syms in refs.items():
    for s in syms:
        b = defs.get(s)
        if b and b != a:
            edges[a].add(b)
            la, lb = layer(a), layer(b)
            if la == 'src/base' and lb != 'src/base':
                breaches.append(f'{a} (base) uses {s} of {b}')
            if la.startswith('transport/') and lb not in (la, 'src/base', BUILDS_ON.get(la)):
                breaches.append(f'{a} (a transport) uses {s} of {b}')
            if (not la.startswith('transport/') and lb.startswith('transport/')
                    and a != 'src/registry'):
                breaches.append(f'{a} reaches transport {b} ({s}) outside the registry')
            if la in RANK and lb in RANK and la != lb and RANK[lb] >= RANK[la]:
                breaches.append(f'{a} calls {s} of {b} by name, a layer not below it')

# 4. strongly connected components (Tarjan), iteratively.
index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
for root in sorted(edges):
    if root in index:
        continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = counter[0]
    counter[0] += 1
    stack.append(root)
    on.add(root)
    while work:
        v, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = counter[0]
                counter[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(edges[w]))))
                break
            if w in on:
                low[v] = min(low[v], index[w])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
for comp in comps:
    if len(comp) > 2:
        breaches.append('call cycle over more than two files: ' + ' '.join(comp))
    elif len(comp) == 2 and layer(comp[0]) != layer(comp[1]):
        breaches.append('call cycle across layers: ' + ' '.join(comp))


# 1, 2. what base and the transports include: every rmx header must lie
# where their layer may look.
def allowed_headers(folder):
    own = [os.path.join(src_dir, folder) + os.sep, os.path.join(src_dir, 'src/base') + os.sep,
           os.path.join(src_dir, 'include/rmx') + os.sep]
    if folder in BUILDS_ON:
        own.append(os.path.join(src_dir, BUILDS_ON[folder]) + os.sep)
    return own + ([os.path.join(src_dir, 'transport/transport.h')]
                  if folder.startswith('transport/') else [])


def include_breach(who, header, folder):
    header = os.path.realpath(header)
    if header.startswith(src_dir + os.sep) and \
            not any(header == p or header.startswith(p) for p in allowed_headers(folder)):
        breaches.append(f'{who} includes {os.path.relpath(header, src_dir)}')


include_re = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
guarded = ['src/base'] + ['transport/' + d for d in sorted(os.listdir(os.path.join(src_dir, 'transport')))
                          if os.path.isdir(os.path.join(src_dir, 'transport', d))]
for folder in guarded:
    root = os.path.join(src_dir, folder)
    for fn in sorted(os.listdir(root)):
        if not fn.endswith(('.c', '.h')):
            continue
        for line in open(os.path.join(root, fn), errors='replace'):
            m = include_re.match(line)
            if m and m.group(1) == '"':
                include_breach(f'{folder}/{fn}', os.path.join(root, m.group(2)), folder)
            elif m:
                for base in (os.path.join(src_dir, 'include'), os.path.join(src_dir, 'src')):
                    if os.path.exists(os.path.join(base, m.group(2))):
                        include_breach(f'{folder}/{fn}', os.path.join(base, m.group(2)), folder)
# The depfiles (Makefile generators keep them) also see headers included
# through other headers.
for obj in objects:
    name = rel_source(obj)
    if not (name.startswith('transport/') or name.startswith('src/base/')):
        continue
    try:
        deps = open(obj + '.d').read()
    except OSError:
        continue  # Ninja keeps them in its own log: the source scan above stands
    for dep in re.split(r'[\s\\]+', deps):
        if dep.endswith('.h'):
            include_breach(name, dep, layer(name) if name.startswith('transport/') else 'src/base')

# 5. the public-API-only programs.
macro_include = re.compile(r'^\s*#\s*include\s+[A-Za-z_]')
for folder in ('examples', 'bench', 'tests/conformance'):
    for dirpath, _, files in os.walk(os.path.join(src_dir, folder)):
        for fn in sorted(files):
            if not fn.endswith(('.c', '.h')):
                continue
            here = os.path.relpath(dirpath, src_dir)
            for lineno, line in enumerate(open(os.path.join(dirpath, fn), errors='replace'), 1):
                if macro_include.match(line):
                    breaches.append(f'{here}/{fn}:{lineno} includes through a macro')
                    continue
                m = include_re.match(line)
                if not m:
                    continue
                kind, hdr = m.groups()
                in_tree = any(os.path.exists(os.path.join(src_dir, d, hdr)) for d in ('include', 'src'))
                ok = (hdr in ('rmx/rmx.h', 'uv.h') or
                      (kind == '"' and os.path.exists(os.path.join(dirpath, hdr)) and '/' not in hdr) or
                      # bench shares the tools' command-line helpers
                      (kind == '"' and here == 'bench' and '/' not in hdr and
                       os.path.exists(os.path.join(src_dir, 'examples', hdr))) or
                      (kind == '<' and '..' not in hdr and not in_tree and not hdr.startswith('rmx/')))
                # a program of the public API does not speak verbs; the fault
                # shims linked in front of rdma-core (fault_*.c) do, and so
                # does rmx-xfer's ibv_reg_mr comparison (bench/xfer_ibv.c)
                if kind == '<' and hdr.split('/')[0] in ('infiniband', 'rdma') and \
                        not fn.startswith('fault_') and \
                        not (here == 'bench' and fn == 'xfer_ibv.c'):
                    ok = False
                if not ok:
                    breaches.append(f'{here}/{fn}:{lineno} includes {hdr}')

# 6. file sizes.
for folder in ('include', 'src', 'transport', 'examples', 'bench', 'tests'):
    for dirpath, _, files in os.walk(os.path.join(src_dir, folder)):
        for fn in files:
            if fn.endswith(('.c', '.h')):
                path = os.path.join(dirpath, fn)
                n = sum(1 for _ in open(path, errors='replace'))
                if n > 600:
                    breaches.append(f'{os.path.relpath(path, src_dir)} has {n} lines (600 at most)')

for b in breaches:
    print('layers:', b)
print(f'layers: {len(objects)} objects, {sum(len(e) for e in edges.values())} arrows, '
      f'{len(breaches)} breaches')
sys.exit(1 if breaches else 0)
