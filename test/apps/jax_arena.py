# A JAX jit program with default preallocation (XLA reserves 75% of the GPU in one region).
import time, jax, jax.numpy as jnp
t = time.time()
x = jnp.arange(1 << 20, dtype=jnp.float32)
@jax.jit
def f(a):
    return jnp.sin(a) * 2.0 + a
for _ in range(3):
    y = f(x).block_until_ready()
print("jax done", float(y[7]), f"{time.time() - t:.2f} s")
