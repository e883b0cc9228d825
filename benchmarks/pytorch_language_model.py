r"""PyTorch's training speed on chapter 12's language model: the same model, batch and optimiser
as the C++ training step (attn/models/language_model_training.hpp, course/training_loop.hpp),
timed on the CPU, in float32, so that the course can quote tokens per second for both.

What one step is (as chapter 12 trains):

  zero_grad; logits = model(inputs); loss = F.cross_entropy(logits, targets) over all B n
  positions; loss.backward(); clip_grad_norm_(params, 1.0);
  Adam(lr 2e-3, betas (0.9, 0.98), eps 1e-9).step()

The model is scripts/fixtures/language_model.py's, imported from it: tok_embed
nn.Embedding(V, E); L pre-norm blocks of
LayerNorm -> grouped-query causal self-attention (h query heads over g key/value heads,
d_k = E / h, q/k/v/o projections without biases, interleaved RoPE with base 10000 on q and k,
K and V repeat_interleave(h / g)) -> residual add, LayerNorm -> Linear(E, d_ff) ReLU
Linear(d_ff, E) -> residual add; a final LayerNorm; an untied lm_head Linear(E, V, bias=False).

The attention is one batched matmul over [B, h, n, n], masked_fill with -inf above the diagonal,
softmax, and a second batched matmul, as nanoGPT writes it for torch < 2.0 (torch 1.13 has no
F.scaled_dot_product_attention): the fair way to write it in PyTorch. --attention heads runs
one query head at a time instead, for comparison.

The data are random token ids in [0, V): the time of a step does not depend on them. Every
timing runs --warmup steps, then times --steps steps with time.perf_counter, in --rounds rounds;
a line per thread count gives the median round's ms per step and B n / (s per step) tokens per
second.

Defaults are chapter 12's: V 75, E 128, h 4, g 2, d_ff 4 E = 512, L 4, context n 64, batch B 12.

usage (Debian's python3-torch 1.13):
  taskset -c 1 /usr/bin/python3 benchmarks/pytorch_language_model.py --threads 1    one core
  taskset -c 0,1 /usr/bin/python3 benchmarks/pytorch_language_model.py --threads 2  both cores
  (--threads 1 2 measures both in one run; pin to both cores for that)

The BLAS decides the answer. Most of a step is float32 matrix products, and torch runs them in
the BLAS it was linked with; the second line printed names the BLAS library the process loaded.
Debian's torch is built with BLAS_INFO=generic and loads libblas.so.3, which on this course's
machines is Debian's reference BLAS (libblas3, /usr/lib/x86_64-linux-gnu/blas/: plain
Fortran loops, one thread): about 95% of a step then goes to its GEMMs. OpenBLAS implements the
same libblas.so.3; it can be used for one run without installing it over the system's, from
Debian's package unpacked into /tmp:

  cd /tmp && apt-get download libopenblas0-openmp && dpkg -x libopenblas0-openmp_*.deb openblas
  LD_LIBRARY_PATH=/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-openmp \
    taskset -c 1 /usr/bin/python3 benchmarks/pytorch_language_model.py --threads 1 --steps 100

(the OpenMP build, as torch uses OpenMP; a step is then ~13 times shorter, so time more steps).
OpenBLAS chooses its kernels by CPU model, and Debian 12's 0.3.21 does not know the newest Xeons:
it falls back to SSE3 ("Prescott"), 2.5 times slower there. The script prints the kernels
OpenBLAS chose and, on that fallback, starts again with OPENBLAS_CORETYPE set to the kernels the
CPU can run (SkylakeX for AVX-512, Haswell for AVX2): the comparison is with OpenBLAS at its best.
PyTorch's own wheels carry MKL, which is what "PyTorch on a CPU" usually means; OpenBLAS is the
nearest to it here.
"""
import argparse
import math
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

# The model is the fixtures' replica, the one whose logits and gradients the tests compare with
# the C++ (tests/attn/models/test_language_model_torch.cpp).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "fixtures"))
from language_model import LanguageModel  # noqa: E402

from torch_bench import describe, time_rounds  # noqa: E402


def time_training(args, threads):
    """The median over rounds of the seconds per step, and every round's."""
    torch.set_num_threads(threads)
    torch.manual_seed(12)
    model = LanguageModel(args.vocab, args.d_model, args.heads, args.kv_heads, args.d_ff,
                          args.layers, args.context, window=0, layout="interleaved",
                          base=10000.0, tied=False)
    per_head = args.attention == "heads"
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=2e-3, betas=(0.9, 0.98), eps=1e-9)
    # a few batches of B windows of n + 1 random ids, used in turn
    data = [torch.randint(0, args.vocab, (args.batch, args.context + 1)) for _ in range(4)]
    batches = [(d[:, :-1].contiguous(), d[:, 1:].reshape(-1).contiguous()) for d in data]

    def step(i):
        inputs, targets = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs, loop=per_head), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    seconds, rounds, loss = time_rounds(step, args.steps, args.rounds, args.warmup)
    if not math.isfinite(loss.item()):
        raise SystemExit("the loss is not finite")
    return seconds, rounds


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", type=int, default=75)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=0, help="0: 4 d_model")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--steps", type=int, default=20, help="timed steps per round")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before each round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, nargs="+", default=[1])
    p.add_argument("--attention", choices=["batched", "heads"], default="batched",
                   help="one matmul over [B, h, n, n] (default) or a loop over query heads")
    args = p.parse_args()
    args.d_ff = args.d_ff or 4 * args.d_model
    h, g, E = args.heads, args.kv_heads, args.d_model
    if h < 1 or g < 1 or h % g or E % h or (E // h) % 2:
        raise SystemExit("need kv-heads dividing heads dividing d-model, and d_k = E / h even")

    torch.set_num_interop_threads(1)
    torch.set_default_dtype(torch.float32)
    shape = LanguageModel(args.vocab, E, h, g, args.d_ff, args.layers, args.context, window=0,
                          layout="interleaved", base=10000.0, tied=False)
    n_params = sum(p.numel() for p in shape.parameters())
    describe(f"V {args.vocab}, E {E}, h {h}, g {g}, d_ff {args.d_ff}, L {args.layers}, "
             f"n {args.context}, B {args.batch}: {n_params:,} parameters; {args.attention} "
             f"attention; {args.rounds} rounds of {args.steps} steps after {args.warmup}")
    tokens = args.batch * args.context
    for threads in args.threads:
        seconds, rounds = time_training(args, threads)
        print(f"threads {threads}: {seconds * 1e3:.2f} ms/step (rounds "
              f"{', '.join(f'{r * 1e3:.2f}' for r in rounds)}), "
              f"{tokens / seconds:,.0f} tokens/s")


if __name__ == "__main__":
    main()
