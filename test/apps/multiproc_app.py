"""Test app for multi-process capture (test/gpu/processes.test.ts). Modes:
  spawn N     torch.multiprocessing spawn, N workers on GPU 0, each launching the same kernels
  ddp         one torchrun worker (gloo backend, every rank on GPU 0): allreduce on the CPU, kernels on GPU 0
  subprocess  a parent that imports nothing CUDA and runs `torch_app.py 2` in a Python subprocess
  profiler    torch.profiler around the kernels, then prints how many CUDA kernel events it recorded
Every worker prints `worker pid=<pid> rank=<rank>` so the test can tell the processes apart."""
import os
import subprocess
import sys


def work(rank):
    import torch
    print(f"worker pid={os.getpid()} rank={rank}", flush=True)
    a = torch.full((1 << 16,), float(rank + 1), device="cuda")
    for _ in range(3):
        a = a * 2.0 + 1.0
    torch.cuda.synchronize()
    return a


def spawn_worker(i, n):
    os.environ["RANK"] = str(i)  # as a launcher would set it; kerncap reads it at CUDA init
    work(i)


def main():
    mode = sys.argv[1]
    if mode == "spawn":
        import torch.multiprocessing as mp
        n = int(sys.argv[2]) if len(sys.argv) > 2 else 2
        mp.spawn(spawn_worker, args=(n,), nprocs=n, join=True)
    elif mode == "ddp":
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        a = work(rank)
        t = torch.tensor([float(a[0].item())])
        dist.all_reduce(t)
        print(f"rank {rank} allreduce {t.item()}", flush=True)
        dist.destroy_process_group()
    elif mode == "subprocess":
        app = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_app.py")
        print(f"parent pid={os.getpid()}", flush=True)
        subprocess.run([sys.executable, app, "2"], check=True)
    elif mode == "profiler":
        import torch
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            work(0)
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        print(f"profiler cuda events {len(kernels)}", flush=True)
        # a second profiled region after the first: gets CUPTI when kerncap has handed it back
        with profile(activities=[ProfilerActivity.CUDA]) as prof2:
            work(0)
        kernels2 = [e for e in prof2.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        print(f"profiler2 cuda events {len(kernels2)}", flush=True)


if __name__ == "__main__":
    main()
