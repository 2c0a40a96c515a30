"""Fake torch._inductor.runtime.benchmarking: the class layout of PyTorch 2.x (a Benchmarker base
and subclasses that override benchmark_gpu and call up to it)."""


class Benchmarker:
    def benchmark_gpu(self, fn, **kwargs):
        fn()
        return 1.0


class TritonBenchmarker(Benchmarker):
    def benchmark_gpu(self, fn, **kwargs):
        return super().benchmark_gpu(fn, **kwargs)


class InductorBenchmarker(TritonBenchmarker):
    def benchmark_gpu(self, fn, **kwargs):
        return super().benchmark_gpu(fn, **kwargs)


benchmarker = InductorBenchmarker()
