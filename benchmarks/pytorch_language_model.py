r"""PyTorch's training speed on chapter 12's language model: the same model, batch and optimiser
as the C++ training step (attn/models/language_model_training.hpp, course/training_loop.hpp),
timed on the CPU, in float32, so that the course can quote tokens per second for both.

What one step is (as chapter 12 trains):

  zero_grad; logits = model(inputs); loss = F.cross_entropy(logits, targets) over all B n
  positions; loss.backward(); clip_grad_norm_(params, 1.0);
  Adam(lr 2e-3, betas (0.9, 0.98), eps 1e-9).step()

The model (scripts/fixtures/language_model.py has the same modules, for the fixtures; nothing is
imported from it): tok_embed nn.Embedding(V, E) ~ N(0, 0.02^2); L pre-norm blocks of
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
PyTorch's own wheels carry MKL, which is what "PyTorch on a CPU" usually means; OpenBLAS is the
nearest to it here.
"""
import argparse
import math
import os
import re
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def rope_table(n, d_k, base):
    """cos, sin [n x d_k/2] of the angles m theta_i, theta_i = base^(-2i/d_k), float32."""
    theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * theta[None, :]
    return angles.cos().float(), angles.sin().float()


def rope(x, cos, sin):
    """x [B, heads, n, d_k]: the interleaved pair (2i, 2i+1) of position m turned by m theta_i."""
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


class GroupedQueryAttention(nn.Module):
    def __init__(self, E, h, g, per_head=False):
        super().__init__()
        self.h, self.g, self.d_k, self.per_head = h, g, E // h, per_head
        self.q_proj = nn.Linear(E, h * self.d_k, bias=False)
        self.k_proj = nn.Linear(E, g * self.d_k, bias=False)
        self.v_proj = nn.Linear(E, g * self.d_k, bias=False)
        self.o_proj = nn.Linear(h * self.d_k, E, bias=False)

    def forward(self, x, cos, sin, blocked):
        B, n, _ = x.shape
        q = self.q_proj(x).view(B, n, self.h, self.d_k).transpose(1, 2)  # [B, h, n, d_k]
        k = self.k_proj(x).view(B, n, self.g, self.d_k).transpose(1, 2)  # [B, g, n, d_k]
        v = self.v_proj(x).view(B, n, self.g, self.d_k).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        G = self.h // self.g
        if self.per_head:  # query head i reads key/value head i // G, one at a time
            heads = torch.cat([attend(q[:, i:i + 1], k[:, i // G:i // G + 1],
                                      v[:, i // G:i // G + 1], blocked)
                               for i in range(self.h)], dim=1)
        else:
            heads = attend(q, k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1),
                           blocked)
        return self.o_proj(heads.transpose(1, 2).reshape(B, n, self.h * self.d_k))


def attend(q, k, v, blocked):
    """[B, heads, n, d_k] each: softmax(q k^T / sqrt(d_k), causal) v, nanoGPT's way."""
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # [B, heads, n, n]
    att = att.masked_fill(blocked, float("-inf"))
    return F.softmax(att, dim=-1) @ v


class FeedForward(nn.Module):
    def __init__(self, E, d_ff):
        super().__init__()
        self.linear1 = nn.Linear(E, d_ff)
        self.linear2 = nn.Linear(d_ff, E)

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))


class Block(nn.Module):
    def __init__(self, E, h, g, d_ff, per_head=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(E)
        self.attn = GroupedQueryAttention(E, h, g, per_head)
        self.norm2 = nn.LayerNorm(E)
        self.ffn = FeedForward(E, d_ff)

    def forward(self, x, cos, sin, blocked):
        x = x + self.attn(self.norm1(x), cos, sin, blocked)
        return x + self.ffn(self.norm2(x))


class LanguageModel(nn.Module):
    def __init__(self, V, E, h, g, d_ff, L, context, base=10000.0, per_head=False):
        super().__init__()
        self.tok_embed = nn.Embedding(V, E)
        nn.init.normal_(self.tok_embed.weight, 0.0, 0.02)
        self.blocks = nn.ModuleList([Block(E, h, g, d_ff, per_head) for _ in range(L)])
        self.norm = nn.LayerNorm(E)
        self.lm_head = nn.Linear(E, V, bias=False)
        cos, sin = rope_table(context, E // h, base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        blocked = torch.ones(context, context, dtype=torch.bool).triu(1)  # key j > query i
        self.register_buffer("blocked", blocked, persistent=False)

    def forward(self, inputs):
        B, n = inputs.shape
        cos, sin, blocked = self.cos[:n], self.sin[:n], self.blocked[:n, :n]
        x = self.tok_embed(inputs)  # [B, n, E]
        for block in self.blocks:
            x = block(x, cos, sin, blocked)
        return self.lm_head(self.norm(x)).view(B * n, -1)  # [B n, V]


def time_training(args, threads):
    """The median over rounds of the seconds per step, and every round's."""
    torch.set_num_threads(threads)
    torch.manual_seed(12)
    model = LanguageModel(args.vocab, args.d_model, args.heads, args.kv_heads, args.d_ff,
                          args.layers, args.context, per_head=args.attention == "heads")
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=2e-3, betas=(0.9, 0.98), eps=1e-9)
    # a few batches of B windows of n + 1 random ids, used in turn
    data = [torch.randint(0, args.vocab, (args.batch, args.context + 1)) for _ in range(4)]
    batches = [(d[:, :-1].contiguous(), d[:, 1:].reshape(-1).contiguous()) for d in data]

    def step(i):
        inputs, targets = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    rounds = []
    for _ in range(args.rounds):
        for i in range(args.warmup):
            step(i)
        start = time.perf_counter()
        for i in range(args.steps):
            loss = step(i)
        rounds.append((time.perf_counter() - start) / args.steps)
    if not math.isfinite(loss.item()):
        raise SystemExit("the loss is not finite")
    return statistics.median(rounds), rounds


def blas_loaded():
    """The BLAS libraries this process has mapped (after a matrix product), resolved."""
    torch.ones(8, 8) @ torch.ones(8, 8)
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if line.rstrip().endswith(".so") or ".so." in line}
    return sorted(os.path.realpath(p) for p in paths
                  if re.search(r"blas|mkl|blis", os.path.basename(p), re.I))


def build_info(key):
    """A value of torch.__config__.show(): BLAS_INFO=..., or 'CPU capability usage: ...'."""
    m = re.search(key + r"[=:] *(\w+)", torch.__config__.show())
    return m.group(1) if m else "unknown"


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
    n_params = sum(p.numel() for p in LanguageModel(args.vocab, E, h, g, args.d_ff,
                                                    args.layers, args.context).parameters())
    print(f"torch {torch.__version__}, BLAS {build_info('BLAS_INFO')}, "
          f"CPU capability {build_info('CPU capability usage')}; "
          f"V {args.vocab}, E {E}, h {h}, g {g}, d_ff {args.d_ff}, L {args.layers}, "
          f"n {args.context}, B {args.batch}: {n_params:,} parameters; {args.attention} "
          f"attention; {args.rounds} rounds of {args.steps} steps after {args.warmup}")
    print("BLAS loaded: " + (", ".join(blas_loaded()) or "none found in /proc/self/maps"))
    tokens = args.batch * args.context
    for threads in args.threads:
        seconds, rounds = time_training(args, threads)
        print(f"threads {threads}: {seconds * 1e3:.2f} ms/step (rounds "
              f"{', '.join(f'{r * 1e3:.2f}' for r in rounds)}), "
              f"{tokens / seconds:,.0f} tokens/s")


if __name__ == "__main__":
    main()
