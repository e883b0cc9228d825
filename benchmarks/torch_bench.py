r"""The helpers of the PyTorch timing scripts (pytorch_language_model.py, pytorch_attention.py):
which BLAS the process runs its products on, OpenBLAS at its best, and timed rounds.

OpenBLAS chooses its kernels by CPU model, and Debian 12's 0.3.21 does not know the newest Xeons:
it falls back to SSE3 ("Prescott"), 2.5 times slower there. fix_openblas_core() notices the
fallback and starts the process again with OPENBLAS_CORETYPE set to the kernels the CPU can run.
"""
import ctypes
import os
import re
import statistics
import sys
import time

import torch


def blas_loaded():
    """The BLAS libraries this process has mapped (after a matrix product), resolved."""
    torch.ones(8, 8) @ torch.ones(8, 8)
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if line.rstrip().endswith(".so") or ".so." in line}
    return sorted(os.path.realpath(p) for p in paths
                  if re.search(r"blas|mkl|blis", os.path.basename(p), re.I))


def openblas_core():
    """The kernel set a loaded OpenBLAS chose for this CPU (openblas_get_corename), or None."""
    for path in blas_loaded():
        if "openblas" in os.path.basename(path):
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
    return None


def cpu_core_type():
    """The OpenBLAS core type that matches this CPU's widest vectors: SkylakeX, Haswell or None."""
    with open("/proc/cpuinfo") as info:
        flags = next((line.split(":", 1)[1].split() for line in info
                      if line.startswith("flags")), [])
    if "avx512f" in flags:
        return "SkylakeX"
    return "Haswell" if "avx2" in flags and "fma" in flags else None


def fix_openblas_core():
    """OpenBLAS picks its kernels by CPU model, and a model newer than the library (Debian 12's
    0.3.21 on a Sapphire or Emerald Rapids Xeon) gets its SSE3 fallback, 'Prescott': PyTorch's
    products then run 2.5 times slower than they can (measured: 152 against 59 ms a step). The
    comparison is with OpenBLAS at its best, so this process starts again with OPENBLAS_CORETYPE
    naming the kernels the CPU's vectors can run, and says so. A core type set by the caller is
    left as it is."""
    core, wanted = openblas_core(), cpu_core_type()
    if core == "Prescott" and wanted and "OPENBLAS_CORETYPE" not in os.environ:
        print(f"OpenBLAS chose its SSE3 kernels (Prescott) on a CPU with "
              f"{'AVX-512' if wanted == 'SkylakeX' else 'AVX2'}: running again with "
              f"OPENBLAS_CORETYPE={wanted}", flush=True)
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, OPENBLAS_CORETYPE=wanted))
    return core


def build_info(key):
    """A value of torch.__config__.show(): BLAS_INFO=..., or 'CPU capability usage: ...'."""
    m = re.search(key + r"[=:] *(\w+)", torch.__config__.show())
    return m.group(1) if m else "unknown"


def describe(what):
    """The first lines every script prints: torch and its BLAS, then `what` (the sizes timed); then
    OpenBLAS set to its best kernels (this may start the process again), and the BLAS loaded."""
    print(f"torch {torch.__version__}, BLAS {build_info('BLAS_INFO')}, "
          f"CPU capability {build_info('CPU capability usage')}; {what}")
    core = fix_openblas_core()
    print("BLAS loaded: " + (", ".join(blas_loaded()) or "none found in /proc/self/maps") +
          (f"; OpenBLAS kernels: {core}" if core else ""))


def time_rounds(run, calls, rounds, warmup):
    """Each round: `warmup` untimed calls run(0), run(1), ..., then `calls` timed ones. The median
    round's seconds per call, every round's, and the last call's result."""
    times, result = [], None
    for _ in range(rounds):
        for i in range(warmup):
            run(i)
        start = time.perf_counter()
        for i in range(calls):
            result = run(i)
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times), times, result
