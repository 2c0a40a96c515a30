"""App for the shim's CPU test: times a function through (fake) Inductor's benchmarker and calls
it once itself; writes the library flag it saw around each call into $FAKE_IGNORE_LOG."""
import os

from torch._inductor.runtime import benchmarking


def launch(tag):
    with open(os.environ["FAKE_IGNORE_LOG"], "a") as f:
        f.write(tag + "\n")


benchmarking.benchmarker.benchmark_gpu(lambda: launch("bench-launch"))
launch("app-launch")
