#!/usr/bin/env python3
"""Test (ctest bench.torch_peer): the PyTorch peer's configuration grid and the
pick of its fastest configuration (bench/torch_peer.py). Needs no PyTorch."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer  # noqa: E402


class Grid(unittest.TestCase):
    def with_cores(self, n):
        old = torch_peer.cores
        torch_peer.cores = lambda: n
        self.addCleanup(setattr, torch_peer, 'cores', old)

    def test_two_cores_pinned_and_every_core(self):
        self.with_cores(2)
        self.assertEqual(torch_peer.thread_grid((1, 2)), [(1, 1), (1, 2), (2, 2)])

    def test_four_cores(self):
        self.with_cores(4)
        self.assertEqual(torch_peer.thread_grid((1, 2)), [(1, 1), (1, 4), (2, 2), (2, 4)])

    def test_one_core_has_no_duplicates(self):
        self.with_cores(1)
        self.assertEqual(torch_peer.thread_grid((1,)), [(1, 1)])

    def test_configs_set_torch_and_blas_threads_apart(self):
        self.with_cores(2)
        cfgs = torch_peer.configs('/opt/ob', (1, 2))
        got = [(c.threads, c.env['OMP_NUM_THREADS'], c.env['OPENBLAS_NUM_THREADS']) for c in cfgs]
        self.assertEqual(got, [(1, '1', '1'), (1, '1', '2'), (2, '2', '2')])
        for c in cfgs:
            self.assertTrue(c.env['LD_LIBRARY_PATH'].startswith('/opt/ob'))
        self.assertIn('every core', cfgs[1].label)
        self.assertEqual(len({c.key for c in cfgs}), 3)

    def test_system_blas_only_without_openblas(self):
        self.with_cores(2)
        self.assertEqual([c.key for c in torch_peer.configs(None, (1, 2))], ['torch_sys_1', 'torch_sys_2'])
        self.assertEqual([c.key for c in torch_peer.configs('/opt/ob', (1,), system_blas=True)],
                         ['torch_sys_1', 'torch_ob_1x1', 'torch_ob_1x2'])


class Pick(unittest.TestCase):
    res = {'a': [50.0, 30.0, 31.0], 'b': [40.0, 41.0, 42.0], 'dtl': [99.0, 99.0, 99.0]}

    def test_higher_is_better(self):
        # 'a' has the best round, 'b' the best median; dtl is not a peer key.
        self.assertEqual(torch_peer.pick(self.res, ['a', 'b'], True), ('a', 'b'))

    def test_lower_is_better(self):
        self.assertEqual(torch_peer.pick(self.res, ['a', 'b'], False), ('a', 'a'))

    def test_winner_lines_name_the_winner_and_count_rounds(self):
        lines = torch_peer.winner_lines(self.res, {'a': 'A', 'b': 'B'}, ['a', 'b'], True, '%.1f')
        self.assertEqual(lines[0], 'best PyTorch configuration: A, 50.0 (best round), 31.0 (median)')
        self.assertEqual(lines[1], '  by median: B, 41.0')
        self.assertEqual(lines[2], '  rounds won: A 1, B 2 (of 3)')


class Calibration(unittest.TestCase):
    def test_drops_only_configurations_far_behind_in_the_first_round(self):
        res = {'a': [30.0, 10.0], 'b': [11.0], 'c': [9.0], 'dtl': [1.0]}
        self.assertEqual(torch_peer.dropped_after_first_round(res, ['a', 'b', 'c'], True), ['c'])
        secs = {'a': [25.4], 'b': [46.1], 'c': [192.0]}  # fashion, round 1, on a busy machine
        self.assertEqual(torch_peer.dropped_after_first_round(secs, ['a', 'b', 'c'], False), ['c'])

    def test_winner_lines_count_rounds_of_the_configurations_kept(self):
        res = {'a': [30.0, 31.0, 29.0], 'b': [28.0, 33.0, 31.0], 'c': [5.0]}
        lines = torch_peer.winner_lines(res, {'a': 'A', 'b': 'B', 'c': 'C'}, ['a', 'b', 'c'], True, '%.0f', ['c'])
        self.assertEqual(lines[0], 'best PyTorch configuration: B, 33 (best round), 31 (median)')
        self.assertEqual(lines[1], '  rounds won: A 1, B 2 (of 3)')
        self.assertIn('first round only', lines[-1])
        self.assertTrue(lines[-1].endswith(': C'))


if __name__ == '__main__':
    unittest.main()
