"""Attention rollout with forward hooks from harshitsinghcode/Fed-X-ViT (`explainability/attention_rollout.py`
`AttentionRollout`, stored revision ef9dcfc). The constructor puts the model in eval mode and registers a forward
hook on every block's `attn.attn_drop` (the timm ViT layout) that appends `output.detach()` to a Python list kept on
the object; `generate` runs the model, stacks the collected maps with `torch.stack(self.attention_maps)`, keeps the
top `int(flat.size(0)*self.discard_ratio)` entries with `torch.topk`, writes a 0/1 mask by index, sums, normalises
and returns `attn_rollout.cpu().numpy()`. The list is never cleared, so a second `generate` on the same object also
averages the first call's maps (original behaviour, kept).
Adaptations: the repository's ViT (a timm model built in its training code, not read) is a small stand-in written
by the collector with the attribute layout the hooks need (`blocks[i].attn.attn_drop`, timm-style `Attention` with
`qkv`, `scale`, softmax then `attn_drop`): 4x4 patches of 16x16 images (16 tokens plus a class token), width 16,
2 heads, 3 blocks. The stand-in draws nothing (dropout 0, eval mode). Each call gets its own `AttentionRollout` on its
own copy of the model, built in the factory (the hooks are registered there); the called method is the original
`AttentionRollout.generate`, passed unbound with the object as its first argument."""
import copy

import torch
import torch.nn as nn


# ---- explainability/attention_rollout.py
class AttentionRollout:
    def __init__(self, model, discard_ratio=0.9):
        self.model = model.eval()
        self.discard_ratio = discard_ratio
        self.attention_maps = []

        for blk in self.model.blocks:
            blk.attn.attn_drop.register_forward_hook(self._hook_attention)

    def _hook_attention(self, module, input, output):
        self.attention_maps.append(output.detach())

    def generate(self, input_tensor):
        _ = self.model(input_tensor)  # Forward pass to fill attention_maps

        avg_attn = torch.stack(self.attention_maps).mean(dim=0)[0]  # [num_heads, tokens, tokens]
        avg_attn = avg_attn.mean(dim=0)  # Mean over heads → [tokens, tokens]

        # Discard low attention scores
        flat = avg_attn.flatten()
        val, idx = torch.topk(flat, int(flat.size(0)*self.discard_ratio))
        mask = torch.zeros_like(flat)
        mask[idx] = 1
        mask = mask.reshape(avg_attn.shape)

        # Attention rollout matrix
        attn_rollout = (avg_attn * mask).sum(dim=0)
        
        # Normalize between 0 and 1
        attn_rollout = attn_rollout - attn_rollout.min()
        attn_rollout = attn_rollout / (attn_rollout.max() + 1e-8)
        return attn_rollout.cpu().numpy()  # NO BREAK in torch 2.13


# ---- stand-in: a tiny timm-style ViT (the repository's model was not read)
class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = self.attn_drop(attn.softmax(dim=-1))
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    def __init__(self, img_size=16, patch=4, dim=16, depth=3, num_heads=2, num_classes=2):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, (img_size // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


def target():
    torch.manual_seed(0)
    model = TinyViT()
    r1 = AttentionRollout(copy.deepcopy(model), discard_ratio=0.9)
    r2 = AttentionRollout(copy.deepcopy(model), discard_ratio=0.5)
    x1 = torch.randn(1, 3, 16, 16)
    x2 = torch.randn(2, 3, 16, 16)
    return [
        (AttentionRollout.generate, (r1, x1), {}),
        (AttentionRollout.generate, (r2, x2), {}),
    ]


EXPECT = ("caller: the hooks only append detached maps to a list and the rollout after the forward pass is "
          "tensor code; the one host step is the final `.cpu().numpy()` conversion, which belongs to the caller "
          "(return the tensor and convert outside), leaving the forward with its hooks and the top-k masking compiled")
