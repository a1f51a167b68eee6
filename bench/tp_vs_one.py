#!/usr/bin/python3
"""Benchmark (not a test): tensor parallelism next to one process.

  /usr/bin/python3 bench/tp_vs_one.py [--rounds 2] [--steps 8] [--dtlc PATH] [--json OUT]

1. Memory. The GPT-2-small-shaped model of bench/specs/gpt_step_bench.dtl
   (vocab 50257, d 768, 12 layers; sequence 128, batch 2) on one process and
   at tp = 2 with `split vocab over tp; split heads over tp; split hidden
   over tp` (the vocabulary splits unevenly: 25129 + 25128 rows). Parameter
   bytes per rank as `dtlc plan` plans them and as rank 0 holds them after
   one step (`dtlc run --memory-report`), their ratio tp = 2 / one process
   (the issue's goal: <= 0.55), and each run's peak RSS (not gated:
   activations and the optimiser state weigh in).
2. Step time of a GPT of 6 layers, d 512, 8 heads, hidden 2048, vocab 8192,
   sequence 128, global batch 8, AdamW: one process (both cores), tp = 2
   (heads and hidden split, Megatron-style) and dp = 2 on two ranks, and dp
   = 2 with `overlap = false` (each gradient bucket reduced after the
   backward pass instead of as soon as it is full); rounds interleaved.
   Reports ms per step (steady, after 2 warm-up steps) and the ratios to one
   process.

No PyTorch peer here: a tensor-parallel PyTorch twin is Megatron-LM-style
code this machine does not have; the one-process run of the same spec is the
reference, and the machine's limits are printed beside the figures.
"""
import argparse
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

TP_RULES = 'split vocab over tp; split heads over tp; split hidden over tp'

STEP_SPEC = """
model StepGpt {
  dim vocab = 8192, seq = 128, d = 512, heads = 8, hidden = 2048, layers = 6
  input tokens  : i32[batch, seq]
  input targets : i32[batch, seq]
  wte    = Embedding(vocab, d)
  param wpe : [seq, d] init normal(std = 0.01)
  blocks = repeat(layers) TransformerBlock(d, heads, hidden)
  ln_f   = LayerNorm(d)
  logits = ln_f(blocks(wte(tokens) + wpe)) @ wte.table
  loss   = cross_entropy(logits, targets, over = vocab)
}
data { train { synthetic(seed = 1) } }
train {
  batch     = 8
  steps     = 10
  optimizer = adamw(lr = 6e-4, betas = (0.9, 0.95), weight_decay = 0.1)
}
"""


def with_parallel(text, block):
    return text + ('\nparallel { %s }\n' % block if block else '')


def plan_memory(dtlc, spec, world, sets=()):
    cmd = [dtlc, 'plan', spec, '--world', str(world), '--format', 'json']
    for s in sets:
        cmd += ['--set', s]
    _, r = bc.run(cmd)
    return json.loads(r.stdout)['memory']


def held_memory(dtlc, spec, nproc, tmp, name, sets=()):
    report = os.path.join(tmp, name + '.mem.json')
    metrics = os.path.join(tmp, name + '.jsonl')
    cmd = [dtlc, 'run', spec, '--steps', '1', '--no-checkpoints', '--memory-report', report, '--metrics', metrics]
    if nproc > 1:
        cmd += ['--nproc', str(nproc)]
    for s in sets:
        cmd += ['--set', s]
    bc.run_dtlc(cmd, metrics, 1, rss=True)
    with open(report) as f:
        return json.load(f), bc.LAST_MAXRSS_MB[0]


def memory_part(dtlc, tmp):
    base = open(os.path.join(bc.HERE, 'specs', 'gpt_step_bench.dtl')).read()
    one = os.path.join(tmp, 'gpt2_one.dtl')
    tp = os.path.join(tmp, 'gpt2_tp2.dtl')
    open(one, 'w').write(base)
    open(tp, 'w').write(with_parallel(base, 'mesh tp = 2; ' + TP_RULES))
    planned_one = plan_memory(dtlc, one, 1)['parameters']
    planned_tp = plan_memory(dtlc, tp, 2)['parameters']
    held_one, rss_one = held_memory(dtlc, one, 1, tmp, 'gpt2_one')
    held_tp, rss_tp = held_memory(dtlc, tp, 2, tmp, 'gpt2_tp2')
    return {
        'planned_parameter_bytes': {'one': planned_one, 'tp2': planned_tp},
        'held_parameter_bytes': {'one': held_one['parameters'], 'tp2': held_tp['parameters']},
        'ratio_planned': planned_tp / planned_one,
        'ratio_held': held_tp['parameters'] / held_one['parameters'],
        'peak_rss_mib': {'one': rss_one, 'tp2_largest_rank': rss_tp},
    }


def step_ms(dtlc, spec, nproc, steps, tmp, name, sets=()):
    metrics = os.path.join(tmp, name + '.jsonl')
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [dtlc, 'run', spec, '--steps', str(steps), '--no-checkpoints', '--metrics', metrics]
    if nproc > 1:
        cmd += ['--nproc', str(nproc)]
    for s in sets:
        cmd += ['--set', s]
    bc.run_dtlc(cmd, metrics, steps)
    m, _ = bc.read_metrics(metrics)
    return 1000 * bc.steady_step_time(m, 8, 2, steps)


def step_part(dtlc, tmp, rounds, steps):
    one = os.path.join(tmp, 'step_one.dtl')
    open(one, 'w').write(STEP_SPEC)
    tp = os.path.join(tmp, 'step_tp2.dtl')
    open(tp, 'w').write(with_parallel(STEP_SPEC, 'mesh tp = 2; split heads over tp; split hidden over tp'))
    dp = os.path.join(tmp, 'step_dp2.dtl')
    open(dp, 'w').write(with_parallel(STEP_SPEC, 'mesh dp = 2; split batch over dp'))
    jobs = [
        ('one', lambda: step_ms(dtlc, one, 1, steps, tmp, 'one')),
        ('tp2', lambda: step_ms(dtlc, tp, 2, steps, tmp, 'tp2')),
        ('dp2', lambda: step_ms(dtlc, dp, 2, steps, tmp, 'dp2', ['train.batch=4'])),
        ('dp2_no_overlap', lambda: step_ms(dtlc, dp, 2, steps, tmp, 'dp2n', ['train.batch=4', 'parallel.overlap=false'])),
    ]
    times = {name: [] for name, _ in jobs}
    for r in range(rounds):
        for name, job in bc.rotated(jobs, r):
            times[name].append(job())
    best = {k: min(v) for k, v in times.items()}
    return {'ms_per_step': times, 'best_ms': best,
            'speedup_vs_one': {k: best['one'] / v for k, v in best.items() if k != 'one'},
            'overlap_gain': best['dp2_no_overlap'] / best['dp2']}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--dtlc')
    ap.add_argument('--json')
    a = ap.parse_args()
    dtlc = bc.dtlc_path(a.dtlc)
    tmp = tempfile.mkdtemp(prefix='dtl_tp_bench_')
    _, limits = bc.machine_limits(dtlc)
    print(bc.cpu_line())
    print(limits)
    print('load before: %s' % bc.loadavg())
    mem = memory_part(dtlc, tmp)
    p, h = mem['planned_parameter_bytes'], mem['held_parameter_bytes']
    print('GPT-2 small shape (vocab 50257, seq 128, batch 2), parameter bytes per rank:')
    print('  planned: one process %.1f MiB, tp = 2 %.1f MiB: ratio %.3f (goal <= 0.55)' % (
        p['one'] / 2**20, p['tp2'] / 2**20, mem['ratio_planned']))
    print('  held:    one process %.1f MiB, tp = 2 %.1f MiB: ratio %.3f' % (
        h['one'] / 2**20, h['tp2'] / 2**20, mem['ratio_held']))
    rss = mem['peak_rss_mib']
    print('  peak RSS: one process %s MiB, tp = 2 largest rank %s MiB (not gated)' % (
        '%.0f' % rss['one'] if rss['one'] else '?', '%.0f' % rss['tp2_largest_rank'] if rss['tp2_largest_rank'] else '?'))
    st = step_part(dtlc, tmp, a.rounds, a.steps)
    print('GPT 6 layers, d 512, seq 128, global batch 8, AdamW: ms per step (best of %d rounds)' % a.rounds)
    for k, v in st['best_ms'].items():
        print('  %-15s %8.1f ms  (all: %s)' % (k, v, bc.fmt_list(st['ms_per_step'][k], '%.1f')))
    for k, v in st['speedup_vs_one'].items():
        print('  %s / one process: %.2fx faster' % (k, v))
    print('  dp = 2 with overlap vs without: %.2fx' % st['overlap_gain'])
    print('load after: %s' % bc.loadavg())
    bc.write_result(a.json, {'memory': mem, 'step': st, 'limits': limits})


if __name__ == '__main__':
    main()
