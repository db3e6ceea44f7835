"""Call overhead of switchyard.ops against NumPy, measured in one process:
`add` on a 1-element array (the fixed cost of a call) and a 4096 x 4096 f32
matmul (where the kernel dominates). NumPy's matmul uses its BLAS with its own
threads; Switchyard's pool uses SWITCHYARD_THREADS (default: every hardware
thread). Run with the same thread count for both, e.g.

    SWITCHYARD_THREADS=2 OPENBLAS_NUM_THREADS=2 build/pyenv/bin/python python/bench/call_overhead.py
"""

import timeit

import numpy as np

import switchyard


def best(stmt, number, repeat=7):
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number


def main():
    one = np.ones(1, np.float32)
    t_np = best(lambda: np.add(one, one), 20000)
    t_sy = best(lambda: switchyard.ops.add(one, one), 20000)
    t_raw = best(lambda: switchyard.ops.call("add", one, one), 20000)
    print(f"add, 1 element: numpy {t_np * 1e6:.2f} us, switchyard.ops.add {t_sy * 1e6:.2f} us "
          f"({t_sy / t_np:.1f}x), ops.call {t_raw * 1e6:.2f} us ({t_raw / t_np:.1f}x)")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4096, 4096), dtype=np.float32)
    w = rng.standard_normal((4096, 4096), dtype=np.float32)
    switchyard.ops.matmul(a, w)  # warm-up: pool threads, pages
    np.matmul(a, w.T)
    t_np = best(lambda: np.matmul(a, w.T), 1, repeat=5)
    t_sy = best(lambda: switchyard.ops.matmul(a, w), 1, repeat=5)
    flops = 2.0 * 4096 ** 3
    print(f"matmul 4096^3 f32: numpy {t_np * 1e3:.1f} ms ({flops / t_np * 1e-9:.0f} GFLOP/s), "
          f"switchyard {t_sy * 1e3:.1f} ms ({flops / t_sy * 1e-9:.0f} GFLOP/s), "
          f"ratio {t_sy / t_np:.2f}")


if __name__ == "__main__":
    main()
