from dataclasses import dataclass


@dataclass(frozen=True)
class GPUTarget:
    backend: str
    arch: object
    warp_size: int


@dataclass(frozen=True)
class CUDAOptions:
    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 3
    maxnreg: object = None
    enable_fp_fusion: bool = True
    extern_libs: object = None
    arch: object = None
