#!/usr/bin/env python3
"""Test (ctest bench.torch_peer): the PyTorch peer's configuration grid, the
PyTorch 2.x venv's discovery and configurations, and the pick of the fastest
configuration and version (bench/torch_peer.py), and the venv check's
helpers (bench/peer_check.py). Needs no PyTorch."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_check  # noqa: E402
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


def fake_venv(root):
    """A folder with an executable bin/python, as torch2_python looks for."""
    os.makedirs(os.path.join(root, 'bin'))
    py = os.path.join(root, 'bin', 'python')
    with open(py, 'w') as f:
        f.write('#!/bin/sh\n')
    os.chmod(py, 0o755)
    return py


class Torch2Venv(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        old_default, old_env = torch_peer.TORCH2_DEFAULT, os.environ.pop('DTL_BENCH_TORCH2', None)
        torch_peer.TORCH2_DEFAULT = os.path.join(self.tmp, 'default')
        self.addCleanup(setattr, torch_peer, 'TORCH2_DEFAULT', old_default)
        if old_env is not None:
            self.addCleanup(os.environ.__setitem__, 'DTL_BENCH_TORCH2', old_env)
        self.addCleanup(os.environ.pop, 'DTL_BENCH_TORCH2', None)

    def test_absent_default_means_not_measured(self):
        self.assertIsNone(torch_peer.torch2_python())

    def test_found_at_the_default_path(self):
        py = fake_venv(torch_peer.TORCH2_DEFAULT)
        self.assertEqual(torch_peer.torch2_python(), py)
        self.assertIsNone(torch_peer.torch2_python('none'))  # the option leaves it out

    def test_option_before_environment_before_default(self):
        fake_venv(torch_peer.TORCH2_DEFAULT)
        env_py = fake_venv(os.path.join(self.tmp, 'env'))
        arg_py = fake_venv(os.path.join(self.tmp, 'arg'))
        os.environ['DTL_BENCH_TORCH2'] = os.path.dirname(os.path.dirname(env_py))
        self.assertEqual(torch_peer.torch2_python(), env_py)
        self.assertEqual(torch_peer.torch2_python(os.path.dirname(os.path.dirname(arg_py))), arg_py)

    def test_a_named_venv_that_is_missing_is_an_error(self):
        with self.assertRaises(SystemExit):
            torch_peer.torch2_python(os.path.join(self.tmp, 'nowhere'))
        os.environ['DTL_BENCH_TORCH2'] = os.path.join(self.tmp, 'nowhere')
        with self.assertRaises(SystemExit):
            torch_peer.torch2_python()


class Torch2Grid(unittest.TestCase):
    def test_threads_times_eager_and_compile_modes(self):
        cfgs = torch_peer.torch2_configs('/v/bin/python', (1, 2), ('default', 'max-autotune-no-cudagraphs'))
        self.assertEqual([c.key for c in cfgs], ['torch2_1', 'torch2_1_compile', 'torch2_1_maxat',
                                                 'torch2_2', 'torch2_2_compile', 'torch2_2_maxat'])
        self.assertEqual([c.compile for c in cfgs[:3]], [None, 'default', 'max-autotune-no-cudagraphs'])
        for c in cfgs:  # MKL's threads follow torch's; no OpenBLAS folder on its path
            self.assertEqual(c.env['OMP_NUM_THREADS'], str(c.threads))
            self.assertEqual(c.env['MKL_NUM_THREADS'], str(c.threads))
            self.assertEqual(c.python, '/v/bin/python')
            self.assertEqual(torch_peer.version_of(c), '2.x')

    def test_configs_add_2x_after_1_13_only_when_found(self):
        cores = torch_peer.cores
        torch_peer.cores = lambda: 2
        self.addCleanup(setattr, torch_peer, 'cores', cores)
        plain = torch_peer.configs('/opt/ob', (1, 2))
        self.assertTrue(all(torch_peer.version_of(c) == '1.13' for c in plain))
        both = torch_peer.configs('/opt/ob', (1, 2), torch2='/v/bin/python', compile_modes=('default',))
        self.assertEqual([c.key for c in both[:len(plain)]], [c.key for c in plain])
        self.assertEqual([c.key for c in both[len(plain):]], ['torch2_1', 'torch2_1_compile', 'torch2_2',
                                                              'torch2_2_compile'])

    def test_worker_cmd_runs_the_configurations_interpreter(self):
        eager, compiled = torch_peer.torch2_configs('/v/bin/python', (1,), ('default',))
        self.assertEqual(torch_peer.worker_cmd(eager, 'w.py', '--x', '1'), ['/v/bin/python', 'w.py', '--x', '1'])
        self.assertEqual(torch_peer.worker_cmd(compiled, 'w.py'), ['/v/bin/python', 'w.py', '--compile', 'default'])
        old = torch_peer.configs('/opt/ob', (1,))[0]
        self.assertEqual(torch_peer.worker_cmd(old, 'w.py')[0], '/usr/bin/python3')

    def test_one_core_key(self):
        self.assertEqual(torch_peer.one_core_key('torch_ob_1x2'), 'torch_ob_1x1')
        self.assertEqual(torch_peer.one_core_key('torch_sys_2'), 'torch_sys_1')
        self.assertEqual(torch_peer.one_core_key('torch2_2_compile'), 'torch2_1')
        with self.assertRaises(ValueError):
            torch_peer.one_core_key('dtl_1')


class Versions(unittest.TestCase):
    cfgs = (torch_peer.configs('/opt/ob', (1,)) +
            torch_peer.torch2_configs('/v/bin/python', (1,), ('default',)))

    def keys(self):
        return [c.key for c in self.cfgs]  # torch_ob_1x1, [torch_ob_1xN,] torch2_1, torch2_1_compile

    def test_best_of_each_version_and_the_winner(self):
        res = {k: [10.0, 11.0] for k in self.keys()}
        res['torch2_1_compile'] = [12.5, 9.0]
        res['dtl'] = [50.0]
        lines = torch_peer.version_lines(res, self.cfgs, True, '%.1f', '/v/bin/python')
        self.assertIn('2.x 12.5 (PyTorch 2.x MKL, torch 1 thr, torch.compile default)', lines[0])
        self.assertIn('1.13 11.0 (PyTorch OpenBLAS', lines[0])
        self.assertEqual(lines[1], '  faster PyTorch version: 2.x')

    def test_lower_is_better(self):
        res = {k: [30.0] for k in self.keys()}
        res['torch_ob_1x1'] = [20.0]
        lines = torch_peer.version_lines(res, self.cfgs, False, '%.0f s', '/v/bin/python')
        self.assertEqual(lines[1], '  faster PyTorch version: 1.13')

    def test_without_the_venv_says_2x_was_not_measured(self):
        cfgs = torch_peer.configs('/opt/ob', (1,))
        lines = torch_peer.version_lines({c.key: [1.0] for c in cfgs}, cfgs, True, '%.1f', None)
        self.assertEqual(len(lines), 2)
        self.assertIn('1.13 1.0', lines[0])
        self.assertIn('PyTorch 2.x: not measured', lines[1])


class PeerCheck(unittest.TestCase):
    def test_blas_of_torch_config(self):
        self.assertEqual(peer_check.blas_of('  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release'), 'MKL')
        self.assertEqual(peer_check.blas_of('BLAS_INFO=open, X'), 'OpenBLAS')
        self.assertEqual(peer_check.blas_of('BLAS_INFO=generic, X'), 'generic')
        self.assertEqual(peer_check.blas_of('no such line'), '?')

    def test_cuda_libraries_from_outside_the_venv_are_named(self):
        maps = '\n'.join([
            '7f00-7f01 r-xp 0 08:01 1 /v/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13',
            '7f02-7f03 r-xp 0 08:01 2 /usr/local/cuda-13.0/lib/libcupti.so.13',
            '7f04-7f05 r-xp 0 08:01 3 /usr/lib/x86_64-linux-gnu/libc.so.6',
            '7f06-7f07 rw-p 0 00:00 0 ',
        ])
        self.assertEqual(peer_check.foreign_cuda_libs(maps, '/v'), ['/usr/local/cuda-13.0/lib/libcupti.so.13'])
        self.assertEqual(peer_check.foreign_cuda_libs(maps, '/usr/local/cuda-13.0/..'), [
            '/v/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13'])


if __name__ == '__main__':
    unittest.main()
