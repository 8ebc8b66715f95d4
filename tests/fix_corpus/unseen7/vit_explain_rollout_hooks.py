"""Attention rollout of vit-explain: `VITAttentionRollout.__init__` registers `module.register_forward_hook(
self.get_attention)` on every module whose name contains 'attn_drop'; the hook appends `output.cpu()` to
`self.attentions`; `__call__` resets the list, runs the model under `torch.no_grad()`, and `rollout` fuses the heads
(`max`), drops the lowest attentions with `flat.topk(int(flat.size(-1)*discard_ratio), -1, False)`,
`indices = indices[indices != 0]` and `flat[0, indices] = 0`, multiplies the normalised matrices, and returns
`mask.reshape(width, width).numpy()` divided by `np.max(mask)` (jacobgil/vit-explain vit_rollout.py: rollout,
VITAttentionRollout; vit_explain.py: `head_fusion='max'`, `discard_ratio=0.9`). The model, a DeiT from torch.hub in
the original, is replaced by a tiny ViT stand-in with timm's block structure (patch embedding, class token, blocks
whose `attn` has an `attn_drop` Dropout applied to the softmaxed attention) on 12x12 images with 4x4 patches (3x3
patches + class token), 2 blocks, 2 heads; eval mode. The PIL/torchvision/cv2 imports are left out."""
import numpy as np
import torch
import torch.nn as nn


def rollout(attentions, discard_ratio, head_fusion):
    result = torch.eye(attentions[0].size(-1))
    with torch.no_grad():
        for attention in attentions:
            if head_fusion == "mean":
                attention_heads_fused = attention.mean(axis=1)
            elif head_fusion == "max":
                attention_heads_fused = attention.max(axis=1)[0]
            elif head_fusion == "min":
                attention_heads_fused = attention.min(axis=1)[0]
            else:
                raise "Attention head fusion type Not supported"

            # Drop the lowest attentions, but
            # don't drop the class token
            flat = attention_heads_fused.view(attention_heads_fused.size(0), -1)
            _, indices = flat.topk(int(flat.size(-1)*discard_ratio), -1, False)
            indices = indices[indices != 0]  # BREAK
            flat[0, indices] = 0

            I = torch.eye(attention_heads_fused.size(-1))
            a = (attention_heads_fused + 1.0*I)/2
            a = a / a.sum(dim=-1)

            result = torch.matmul(a, result)

    # Look at the total attention between the class token,
    # and the image patches
    mask = result[0, 0 , 1 :]
    # In case of 224x224 image, this brings us from 196 to 14
    width = int(mask.size(-1)**0.5)
    mask = mask.reshape(width, width).numpy()
    mask = mask / np.max(mask)
    return mask


class VITAttentionRollout:
    def __init__(self, model, attention_layer_name='attn_drop', head_fusion="mean",
        discard_ratio=0.9):
        self.model = model
        self.head_fusion = head_fusion
        self.discard_ratio = discard_ratio
        for name, module in self.model.named_modules():
            if attention_layer_name in name:
                module.register_forward_hook(self.get_attention)

        self.attentions = []

    def get_attention(self, module, input, output):
        self.attentions.append(output.cpu())

    def __call__(self, input_tensor):
        self.attentions = []
        with torch.no_grad():
            output = self.model(input_tensor)

        return rollout(self.attentions, self.discard_ratio, self.head_fusion)


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, attn_drop=0., proj_drop=0.):
        super().__init__()
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=2.):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads=num_heads, qkv_bias=True, attn_drop=0.1)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return x


class TinyViT(nn.Module):
    def __init__(self, img_size=12, patch_size=4, dim=8, depth=2, num_heads=2, num_classes=5):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size)
        num_patches = (img_size // patch_size) ** 2
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, num_patches + 1, dim))
        self.blocks = nn.ModuleList([Block(dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.size(0), -1, -1), x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


def target():
    torch.manual_seed(0)
    model = TinyViT()
    model.eval()
    grad_rollout = VITAttentionRollout(model, head_fusion="max", discard_ratio=0.9)
    img1 = torch.randn(1, 3, 12, 12)
    img2 = torch.randn(1, 3, 12, 12)
    return [
        (grad_rollout, (img1,), {}),
        (grad_rollout, (img2,), {}),
    ]


EXPECT = ("rewrite: keep the rollout on tensors: zero the lowest attentions with a mask that spares the class token "
          "(`flat[0].scatter_(0, indices[0], 0)` after restoring entry 0, or a `torch.where` on the rank) instead of "
          "`indices[indices != 0]`, keep the hooks' outputs as tensors (no `.cpu()`), and return "
          "`mask / mask.max()` as a tensor, leaving `.numpy()` to the caller")
