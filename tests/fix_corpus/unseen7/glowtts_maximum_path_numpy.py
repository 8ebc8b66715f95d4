"""Glow-TTS monotonic alignment search in NumPy: the training branch of `FlowGenerator.forward` computes the
log-likelihood of every text/frame pairing under `torch.no_grad()` and calls `commons.maximum_path(logp, mask)`,
whose "numpy-friendly version" moves `value.cpu().detach().numpy()` and the mask to the host, runs the Viterbi-like
dynamic programme with `np.pad`/`np.where` in a loop over frames and the backtrack over `reversed(range(t_y))`, and
returns `torch.from_numpy(path).to(device=device, dtype=dtype)`; the alignment then expands the prior means and the
log-durations (jaywalnut310/glow-tts commons.py: maximum_path, sequence_mask; models.py: FlowGenerator.forward, the
`gen=False` branch). The text encoder and the flow decoder are replaced by inputs (`x_m`, `x_logs`, the latent `z`,
the lengths): the call is the alignment block of the forward. One change for runnability: `np.bool` (removed from
NumPy) is written `bool`."""
import math

import numpy as np
import torch


def sequence_mask(length, max_length=None):
  if max_length is None:
    max_length = length.max()
  x = torch.arange(max_length, dtype=length.dtype, device=length.device)
  return x.unsqueeze(0) < length.unsqueeze(1)


def maximum_path(value, mask, max_neg_val=-np.inf):
  """ Numpy-friendly version. It's about 4 times faster than torch version.
  value: [b, t_x, t_y]
  mask: [b, t_x, t_y]
  """
  value = value * mask

  device = value.device
  dtype = value.dtype
  value = value.cpu().detach().numpy()
  mask = mask.cpu().detach().numpy().astype(bool)

  b, t_x, t_y = value.shape
  direction = np.zeros(value.shape, dtype=np.int64)
  v = np.zeros((b, t_x), dtype=np.float32)
  x_range = np.arange(t_x, dtype=np.float32).reshape(1,-1)
  for j in range(t_y):
    v0 = np.pad(v, [[0,0],[1,0]], mode="constant", constant_values=max_neg_val)[:, :-1]  # BREAK
    v1 = v
    max_mask = (v1 >= v0)
    v_max = np.where(max_mask, v1, v0)
    direction[:, :, j] = max_mask

    index_mask = (x_range <= j)
    v = np.where(index_mask, v_max + value[:, :, j], max_neg_val)
  direction = np.where(mask, direction, 1)

  path = np.zeros(value.shape, dtype=np.float32)
  index = mask[:, :, 0].sum(1).astype(np.int64) - 1
  index_range = np.arange(b)
  for j in reversed(range(t_y)):
    path[index_range, index, j] = 1
    index = index + direction[index_range, index, j] - 1
  path = path * mask.astype(np.float32)
  path = torch.from_numpy(path).to(device=device, dtype=dtype)
  return path


def align(x_m, x_logs, x_lengths, z, y_lengths):
  """The alignment block of FlowGenerator.forward (gen=False)."""
  x_mask = torch.unsqueeze(sequence_mask(x_lengths, x_m.size(2)), 1).to(x_m.dtype)
  y_max_length = z.size(2)
  z_mask = torch.unsqueeze(sequence_mask(y_lengths, y_max_length), 1).to(x_mask.dtype)
  attn_mask = torch.unsqueeze(x_mask, -1) * torch.unsqueeze(z_mask, 2)

  with torch.no_grad():
    x_s_sq_r = torch.exp(-2 * x_logs)
    logp1 = torch.sum(-0.5 * math.log(2 * math.pi) - x_logs, [1]).unsqueeze(-1) # [b, t, 1]
    logp2 = torch.matmul(x_s_sq_r.transpose(1,2), -0.5 * (z ** 2)) # [b, t, d] x [b, d, t'] = [b, t, t']
    logp3 = torch.matmul((x_m * x_s_sq_r).transpose(1,2), z) # [b, t, d] x [b, d, t'] = [b, t, t']
    logp4 = torch.sum(-0.5 * (x_m ** 2) * x_s_sq_r, [1]).unsqueeze(-1) # [b, t, 1]
    logp = logp1 + logp2 + logp3 + logp4 # [b, t, t']

    attn = maximum_path(logp, attn_mask.squeeze(1)).unsqueeze(1).detach()
  z_m = torch.matmul(attn.squeeze(1).transpose(1, 2), x_m.transpose(1, 2)).transpose(1, 2) # [b, t', t], [b, t, d] -> [b, d, t']
  z_logs = torch.matmul(attn.squeeze(1).transpose(1, 2), x_logs.transpose(1, 2)).transpose(1, 2) # [b, t', t], [b, t, d] -> [b, d, t']
  logw_ = torch.log(1e-8 + torch.sum(attn, -1)) * x_mask
  return z_m, z_logs, logw_, attn


def _batch(b, d, t_x, t_y, x_lengths, y_lengths):
  x_m = torch.randn(b, d, t_x)
  x_logs = 0.1 * torch.randn(b, d, t_x)
  z = torch.randn(b, d, t_y)
  return x_m, x_logs, torch.tensor(x_lengths), z, torch.tensor(y_lengths)


def target():
  torch.manual_seed(0)
  batch1 = _batch(2, 4, 5, 12, [5, 3], [12, 9])
  batch2 = _batch(2, 4, 5, 12, [4, 5], [10, 12])
  return [
    (align, batch1, {}),
    (align, batch2, {}),
  ]


EXPECT = ("rewrite: port `maximum_path`'s dynamic programme from NumPy to torch ops on the device (`F.pad` for "
          "`np.pad`, `torch.where` for `np.where`, the backtrack with advanced indexing; the loops run over the static "
          "`t_y` and unroll), so that no `.cpu().numpy()` / `torch.from_numpy` round trip is left; otherwise split the "
          "no-grad alignment out as an eager step")
