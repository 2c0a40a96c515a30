"""Test app: NCCL collectives on one GPU (torch.distributed, nccl backend, world_size 1, rank 0,
a TCP rendezvous on a free local port). NCCL may short-circuit a one-rank all_reduce without a
kernel, so the app also runs all_to_all_single and a batched send/recv to itself (point-to-point
to self goes through NCCL's kernel); each op that torch refuses on one rank is skipped. Prints
"nccl done" and exits 0."""
import socket
import torch
import torch.distributed as dist

s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", world_size=1, rank=0, device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
y = torch.empty_like(x)
for _ in range(2):
    dist.all_reduce(x)
    try:
        dist.all_to_all_single(y, x)
    except Exception as e:  # noqa: BLE001
        print("all_to_all_single:", e)
    try:
        for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, 0), dist.P2POp(dist.irecv, y, 0)]):
            w.wait()
    except Exception as e:  # noqa: BLE001
        print("batch_isend_irecv:", e)
torch.cuda.synchronize()
dist.destroy_process_group()
print("nccl done", float(x[0]), float(y[0]))
