#!/usr/bin/env python3
"""Every command block in the docs is either run or says why not.

A command block is a fenced block whose info string is sh, bash, shell or
console, or an untyped fence whose first line is a command (`$ …`, `dtlc …`,
`build/bin/dtlc …`, `bash …`, `scripts/…`, `export …`). The line just before
its opening fence must be one of:

  <!-- doc-test: run -->            run it; every command must succeed
  <!-- doc-test: skip: REASON -->    not run, for the one-line REASON given

and any fenced block may instead carry

  <!-- doc-test: file NAME -->       write the block to NAME in the scratch folder

so a spec shown in a page can be used by that page's commands. Runnable
blocks of one page run in order, in one scratch folder holding a copy of
`samples/` (so nothing a command writes lands in the source tree) and
`build/bin/dtlc` (and `dtlc` on PATH): a stand-in for the dtlc under test
that appends `--steps 2` to every `run` (but a `run --verify K`, which K
bounds), and caps `--nproc` at 2, so each run takes seconds. A runnable block may not call
the test scripts (scripts/test.sh, scripts/sample.sh, ctest, this file).

An untagged command block, a skip without a reason or a runnable block that
fails is reported as FILE:LINE and the script exits 1.

usage: check_doc_commands.py --dtlc PATH --root REPO [--work DIR] [FILE.md …]
(default files: REPO/README.md and REPO/docs/*.md)
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

COMMAND_LANGS = {'sh', 'bash', 'shell', 'console'}
COMMAND_START = re.compile(r'^(\$ |dtlc\b|build/bin/dtlc\b|bash\b|scripts/|export\b)')
TAG = re.compile(r'^<!--\s*doc-test:\s*(.*?)\s*-->\s*$')
FORBIDDEN = re.compile(r'scripts/(test|sample)\.sh|\bctest\b|check_doc_commands')
FENCE = re.compile(r'^(\s*)(`{3,}|~{3,})\s*([\w+-]*)')
BLOCK_TIMEOUT_S = 180


class Block:
    def __init__(self, path, line, lang, body, tag, tag_line):
        self.path, self.line, self.lang, self.body = path, line, lang, body
        self.tag, self.tag_line = tag, tag_line

    def where(self):
        return '%s:%d' % (self.path, self.line)

    def is_command(self):
        if self.lang in COMMAND_LANGS:
            return True
        first = next((l.strip() for l in self.body if l.strip()), '')
        return self.lang == '' and bool(COMMAND_START.match(first))

    def script(self):
        """The commands: a console block's `$ ` lines, else every line."""
        if self.lang == 'console' or any(l.startswith('$ ') for l in self.body):
            return '\n'.join(l[2:] for l in self.body if l.startswith('$ ')) + '\n'
        return '\n'.join(self.body) + '\n'


def parse_blocks(path, text):
    """Fenced blocks of a Markdown file, each with the tag on the line before it."""
    lines = text.split('\n')
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1  # the closing fence
        tag, tag_line = None, None
        if start > 0:
            t = TAG.match(lines[start - 1].strip())
            if t:
                tag, tag_line = t.group(1), start
        blocks.append(Block(path, start + 1, lang, body, tag, tag_line))
    return blocks


def classify(block):
    """(kind, argument, error): kind is run, skip, file or None."""
    tag = block.tag
    if tag is None:
        if block.is_command():
            return None, None, ('untagged command block; put `<!-- doc-test: run -->` or '
                                '`<!-- doc-test: skip: REASON -->` on the line before its fence')
        return None, None, None
    if tag == 'run':
        if FORBIDDEN.search(block.script()):
            return None, None, 'a runnable block may not call the test scripts (%s)' % FORBIDDEN.search(
                block.script()).group(0)
        return 'run', None, None
    m = re.match(r'^skip\s*(?::|—|-)\s*(\S.*)$', tag)
    if m:
        return 'skip', m.group(1), None
    if tag.startswith('skip'):
        return None, None, 'a skipped block needs a reason: `<!-- doc-test: skip: REASON -->`'
    m = re.match(r'^file\s+([\w.-]+(?:/[\w.-]+)*)$', tag)
    if m and not m.group(1).startswith('..'):
        return 'file', m.group(1), None
    return None, None, 'unknown doc-test tag `%s` (run, skip: REASON, file NAME)' % tag


def make_scratch(work, dtlc, root):
    """A folder where the docs' paths work: samples/, build/bin/dtlc, dtlc on PATH."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, 'build', 'bin'))
    os.makedirs(os.path.join(work, 'bin'))
    shutil.copytree(os.path.join(root, 'samples'), os.path.join(work, 'samples'))
    stand_in = os.path.join(work, 'build', 'bin', 'dtlc')
    with open(stand_in, 'w') as f:
        f.write('#!/usr/bin/env bash\n'
                '# The doc test\'s dtlc: `run` trains 2 steps on at most 2 ranks.\n'
                'if [ "${1:-}" != run ]; then exec %s "$@"; fi\n'
                'args=()\n'
                'for a in "$@"; do\n'
                '  if [ "${prev:-}" = --nproc ] && [ "$a" -gt 2 ] 2>/dev/null; then a=2; fi\n'
                '  args+=("$a"); prev=$a\n'
                'done\n'
                'case " $* " in *" --verify "*|*" --verify="*) exec %s "${args[@]}";; esac  # K bounds it\n'
                'exec %s "${args[@]}" --steps 2\n' % (shquote(dtlc), shquote(dtlc), shquote(dtlc)))
    os.chmod(stand_in, 0o755)
    os.symlink(stand_in, os.path.join(work, 'bin', 'dtlc'))


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def run_block(block, work):
    env = dict(os.environ)
    env['PATH'] = os.path.join(work, 'bin') + os.pathsep + env.get('PATH', '')
    try:
        r = subprocess.run(['bash', '-euo', 'pipefail', '-c', block.script()], cwd=work, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors='replace',  # a command may print any bytes (dtlc generate)
                           timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 'did not finish within %d s' % BLOCK_TIMEOUT_S
    if r.returncode != 0:
        tail = '\n'.join(r.stdout.rstrip().split('\n')[-15:])
        return 'exited with status %d:\n%s' % (r.returncode, tail)
    return None


def check_file(path, shown, dtlc, root, work, only_tags):
    """Errors of one page, as 'FILE:LINE: message'; runs its runnable blocks."""
    with open(path, encoding='utf-8') as f:
        blocks = parse_blocks(shown, f.read())
    errors, ran = [], 0
    made = False
    for b in blocks:
        kind, arg, error = classify(b)
        if error:
            errors.append('%s: %s' % (b.where(), error))
            continue
        if only_tags or kind in (None, 'skip'):
            continue
        if not made:
            make_scratch(work, dtlc, root)
            made = True
        if kind == 'file':
            dest = os.path.join(work, arg)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, 'w') as f:
                f.write('\n'.join(b.body) + '\n')
        else:
            failure = run_block(b, work)
            ran += 1
            if failure:
                errors.append('%s: the runnable block %s' % (b.where(), failure))
    return errors, ran, len([b for b in blocks if b.is_command()])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--dtlc', help='the dtlc binary under test')
    ap.add_argument('--root', required=True, help='the repository root')
    ap.add_argument('--work', help='scratch folder (default: a temporary one, removed after)')
    ap.add_argument('--tags-only', action='store_true', help='check the tags, run nothing')
    ap.add_argument('files', nargs='*')
    a = ap.parse_args(argv)
    root = os.path.abspath(a.root)
    if not a.tags_only and not a.dtlc:
        ap.error('--dtlc is required unless --tags-only')
    dtlc = os.path.abspath(a.dtlc) if a.dtlc else None
    files = a.files or [os.path.join(root, 'README.md')] + sorted(glob.glob(os.path.join(root, 'docs', '*.md')))
    work = a.work or tempfile.mkdtemp(prefix='dtl_doc_test_')
    errors, ran, commands = [], 0, 0
    try:
        for path in files:
            shown = os.path.relpath(path, root) if os.path.abspath(path).startswith(root + os.sep) else path
            page_work = os.path.join(work, re.sub(r'[^\w.-]', '_', shown))
            e, r, c = check_file(path, shown, dtlc, root, page_work, a.tags_only)
            errors += e
            ran += r
            commands += c
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    for e in errors:
        print(e)
    print('%d command blocks in %d files; %d run; %d problems' % (commands, len(files), ran, len(errors)))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
