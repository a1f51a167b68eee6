#!/usr/bin/env python3
"""The doc test's checker on small pages: what counts as a command block, what
a tag must say, and that a failing runnable block fails with its FILE:LINE.

usage: check_doc_commands_test.py DTLC REPO
"""
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_doc_commands as c  # noqa: E402

DTLC, ROOT = None, None


def problems(text, run=False):
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, 'page.md')
        with open(page, 'w') as f:
            f.write(text)
        errors, _, _ = c.check_file(page, 'page.md', DTLC, ROOT, os.path.join(d, 'work'), not run)
        return errors


class Tags(unittest.TestCase):
    def test_untagged_command_blocks_are_named_by_line(self):
        text = ('# Page\n\n```sh\ndtlc check x.dtl\n```\n\n'
                '```\n$ build/bin/dtlc run x.dtl\n```\n\n'
                '```console\n$ ls\n```\n')
        errors = problems(text)
        self.assertEqual([e.split(':')[1] for e in errors], ['3', '7', '11'])
        self.assertIn('untagged command block', errors[0])

    def test_spec_and_output_blocks_need_no_tag(self):
        self.assertEqual(problems('```\nmodel M {\n}\n```\n\n```json\n{"a": 1}\n```\n'), [])

    def test_a_skip_needs_a_reason(self):
        self.assertEqual(problems('<!-- doc-test: skip: needs two machines -->\n```sh\nexport A=1\n```\n'), [])
        errors = problems('<!-- doc-test: skip -->\n```sh\nexport A=1\n```\n')
        self.assertEqual(len(errors), 1)
        self.assertIn('page.md:2: a skipped block needs a reason', errors[0])

    def test_unknown_tags_and_recursion_are_refused(self):
        self.assertIn('unknown doc-test tag', problems('<!-- doc-test: maybe -->\n```sh\nls\n```\n')[0])
        self.assertIn('may not call the test scripts',
                      problems('<!-- doc-test: run -->\n```sh\nbash scripts/test.sh\n```\n')[0])

    def test_the_repository_docs_are_tagged(self):
        files = [os.path.join(ROOT, 'README.md')] + [
            os.path.join(ROOT, 'docs', f) for f in sorted(os.listdir(os.path.join(ROOT, 'docs'))) if f.endswith('.md')]
        for path in files:
            with open(path) as f:
                text = f.read()
            self.assertEqual(problems(text), [], path)


class Running(unittest.TestCase):
    def test_a_failing_block_fails_with_its_line(self):
        errors = problems('text\n\n<!-- doc-test: run -->\n```sh\ntrue\nfalse\n```\n', run=True)
        self.assertEqual(len(errors), 1)
        self.assertTrue(errors[0].startswith('page.md:4: the runnable block exited with status 1'), errors[0])

    def test_file_blocks_feed_later_commands_and_dtlc_is_the_one_under_test(self):
        text = ('<!-- doc-test: file s.dtl -->\n```\nmodel M {\n  dim d = 4\n  input x : f32[batch, d]\n'
                '  loss = mean(x)\n}\n```\n\n<!-- doc-test: run -->\n```sh\n'
                'build/bin/dtlc check s.dtl | grep -q "model M"\ndtlc check samples/synthetic_mlp.dtl\n```\n')
        self.assertEqual(problems(text, run=True), [])

    def test_run_commands_are_cut_to_two_steps(self):
        text = ('<!-- doc-test: run -->\n```sh\n'
                'build/bin/dtlc run samples/synthetic_mlp.dtl --steps 500 --metrics m.jsonl\n'
                'test "$(wc -l < m.jsonl)" -eq 2\n```\n')
        self.assertEqual(problems(text, run=True), [])


if __name__ == '__main__':
    DTLC, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=sys.argv[:1])
