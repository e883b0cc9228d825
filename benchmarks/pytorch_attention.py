r"""PyTorch's attention, forward and backward, on one CPU thread: the numbers that
bench_efficient's BM_TiledForwardBackward is compared with (chapter 10's page).

One call is what a training step does with one head: the forward as torch 1.13 writes it for
nn.MultiheadAttention (it has no F.scaled_dot_product_attention),

  S = (Q K^T) / sqrt(d);  S.masked_fill(upper triangle, -inf) when causal;
  P = softmax(S, dim=-1);  out = P V

and then autograd's backward from a fixed d_out, which gives dQ, dK and dV. Q, K, V [n x d] of
N(0, 1), d = 64, n in 256, 1024, 4096, causal or not: the sizes of BM_TiledForwardBackward.
Each of --rounds rounds runs two calls untimed, then about --seconds of calls timed with
time.perf_counter; a line per size gives the median round's ms per call.

usage (Debian's python3-torch 1.13, with OpenBLAS as pytorch_language_model.py explains):
  LD_LIBRARY_PATH=/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-openmp \
    taskset -c 1 /usr/bin/python3 benchmarks/pytorch_attention.py
"""
import argparse
import math

import torch

from torch_bench import describe, time_rounds


def time_attention(n, d, causal, calls, rounds):
    """The median over rounds of the seconds per forward and backward, and every round's."""
    torch.manual_seed(n + causal)
    q, k, v = (torch.randn(n, d, requires_grad=True) for _ in range(3))
    d_out = torch.randn(n, d)
    above = torch.ones(n, n, dtype=torch.bool).triu(1) if causal else None  # [n x n]
    scale = 1.0 / math.sqrt(d)

    def once(_):
        s = (q @ k.t()) * scale  # [n x n]
        if above is not None:
            s = s.masked_fill(above, float("-inf"))
        out = torch.softmax(s, dim=-1) @ v  # [n x d]
        q.grad = k.grad = v.grad = None
        out.backward(d_out)

    seconds, times, _ = time_rounds(once, calls, rounds, warmup=2)
    if not all(torch.isfinite(t.grad).all() for t in (q, k, v)):
        raise SystemExit("a gradient is not finite")
    return seconds, times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=1.0,
                   help="about how long one round of a size lasts")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    describe(f"d {args.d}, one thread, {args.rounds} rounds")
    for n in args.sizes:
        for causal in (False, True):
            probe, _ = time_attention(n, args.d, causal, 1, 1)
            calls = max(1, round(args.seconds / probe))
            seconds, times = time_attention(n, args.d, causal, calls, args.rounds)
            print(f"n {n} causal {int(causal)}: {seconds * 1e3:.3f} ms per forward and backward "
                  f"(rounds {', '.join(f'{t * 1e3:.3f}' for t in times)}; {calls} calls each)")


if __name__ == "__main__":
    main()
