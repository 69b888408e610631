import torch
from kernels.attention import flash_attention
from kernels.matmul import matmul
a = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
print("matmul max abs diff", (matmul(a, a).float() - a.float() @ a.float()).abs().max().item())
q = torch.randn(1, 4, 256, 64, device="cuda", dtype=torch.bfloat16)
ref = torch.nn.functional.scaled_dot_product_attention(q.float(), q.float(), q.float())
print("attention max abs diff", (flash_attention(q, q, q).float() - ref).abs().max().item())
for call in (lambda: matmul(a.double(), a.double()), lambda: flash_attention(q.double(), q.double(), q.double())):
    try:
        call()
        print("NOT refused")
    except ValueError as e:
        print("refused:", e)
