"""Test app: one JAX jit function that XLA compiles into a single fused kernel (a loop fusion of
tanh, multiply and add over 2^N float32 elements), run `rounds` times on the same inputs, which
come from the host (no kernel makes them). argv: rounds (default 5), log2 of the element count
(default 22). XLA_PYTHON_CLIENT_PREALLOCATE is the caller's choice."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
n = 1 << (int(sys.argv[2]) if len(sys.argv) > 2 else 22)
rng = np.random.default_rng(0)
a = jax.device_put(rng.standard_normal(n, dtype=np.float32))
b = jax.device_put(rng.standard_normal(n, dtype=np.float32))


@jax.jit
def f(a, b):
    return jnp.tanh(a) * b + a


for _ in range(rounds):
    y = f(a, b).block_until_ready()
print(f"checksum {float(y[7]):.6f}")
