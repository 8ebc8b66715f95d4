"""2D sinusoidal positional encoding added to a feature map (tatp22/multidim-positional-encoding
`positional_encodings/torch_encodings.py`: `get_emb`, `PositionalEncoding2D`, `PositionalEncodingPermute2D`,
`Summer`). `PositionalEncoding2D.forward` raises on a non-4d input, returns `self.cached_penc` when
`self.cached_penc is not None and self.cached_penc.shape == tensor.shape`, otherwise resets the cache, builds the
positions with `torch.arange(x).type(self.inv_freq.type())` (a type string), the sin/cos table with `einsum`, fills
a zeros tensor `.type(tensor.type())` by slices and stores `self.cached_penc = emb[None, ...].repeat(...)` on the
module; `Summer` asserts the sizes match (a formatted message) and returns `tensor + penc`.
Adaptations: the package's README usage (`Summer(PositionalEncodingPermute2D(C))` on a `(batch, ch, x, y)` map) is
placed in a minimal stand-in vision block (a conv stem, the positional summer, one `nn.MultiheadAttention` over the
flattened map, mean pooling and a linear head); sizes shrunk (10 channels, 6x5 and 4x7 maps). The two calls use maps
of different sizes, so the second rebuilds the cache."""
import numpy as np
import torch
import torch.nn as nn


def get_emb(sin_inp):
    """
    Gets a base embedding for one dimension with sin and cos intertwined
    """
    emb = torch.stack((sin_inp.sin(), sin_inp.cos()), dim=-1)
    return torch.flatten(emb, -2, -1)


class PositionalEncoding2D(nn.Module):
    def __init__(self, channels):
        """
        :param channels: The last dimension of the tensor you want to apply pos emb to.
        """
        super(PositionalEncoding2D, self).__init__()
        self.org_channels = channels
        channels = int(np.ceil(channels / 4) * 2)
        self.channels = channels
        inv_freq = 1.0 / (10000 ** (torch.arange(0, channels, 2).float() / channels))
        self.register_buffer("inv_freq", inv_freq)
        self.cached_penc = None

    def forward(self, tensor):
        """
        :param tensor: A 4d tensor of size (batch_size, x, y, ch)
        :return: Positional Encoding Matrix of size (batch_size, x, y, ch)
        """
        if len(tensor.shape) != 4:
            raise RuntimeError("The input tensor has to be 4d!")

        if self.cached_penc is not None and self.cached_penc.shape == tensor.shape:  # NO BREAK in torch 2.13
            return self.cached_penc

        self.cached_penc = None
        batch_size, x, y, orig_ch = tensor.shape
        pos_x = torch.arange(x, device=tensor.device).type(self.inv_freq.type())
        pos_y = torch.arange(y, device=tensor.device).type(self.inv_freq.type())
        sin_inp_x = torch.einsum("i,j->ij", pos_x, self.inv_freq)
        sin_inp_y = torch.einsum("i,j->ij", pos_y, self.inv_freq)
        emb_x = get_emb(sin_inp_x).unsqueeze(1)
        emb_y = get_emb(sin_inp_y)
        emb = torch.zeros((x, y, self.channels * 2), device=tensor.device).type(
            tensor.type()
        )
        emb[:, :, : self.channels] = emb_x
        emb[:, :, self.channels : 2 * self.channels] = emb_y

        self.cached_penc = emb[None, :, :, :orig_ch].repeat(tensor.shape[0], 1, 1, 1)
        return self.cached_penc


class PositionalEncodingPermute2D(nn.Module):
    def __init__(self, channels):
        """
        Accepts (batchsize, ch, x, y) instead of (batchsize, x, y, ch)
        """
        super(PositionalEncodingPermute2D, self).__init__()
        self.penc = PositionalEncoding2D(channels)

    def forward(self, tensor):
        tensor = tensor.permute(0, 2, 3, 1)
        enc = self.penc(tensor)
        return enc.permute(0, 3, 1, 2)

    @property
    def org_channels(self):
        return self.penc.org_channels


class Summer(nn.Module):
    def __init__(self, penc):
        """
        :param model: The type of positional encoding to run the summer on.
        """
        super(Summer, self).__init__()
        self.penc = penc

    def forward(self, tensor):
        """
        :param tensor: A 3, 4 or 5d tensor that matches the model output size
        :return: Positional Encoding Matrix summed to the original tensor
        """
        penc = self.penc(tensor).to(tensor.device)
        assert (
            tensor.size() == penc.size()
        ), "The original tensor size {} and the positional encoding tensor size {} must match!".format(
            tensor.size(), penc.size()
        )
        return tensor + penc


class TinyVisionBlock(nn.Module):
    """Adaptation: stand-in model around the package's README usage."""

    def __init__(self, in_ch=3, channels=10, num_classes=5):
        super().__init__()
        self.stem = nn.Conv2d(in_ch, channels, 3, padding=1)
        self.pos = Summer(PositionalEncodingPermute2D(channels))
        self.attn = nn.MultiheadAttention(channels, num_heads=2, batch_first=True)
        self.head = nn.Linear(channels, num_classes)

    def forward(self, img):
        x = self.pos(torch.relu(self.stem(img)))
        tokens = x.flatten(2).transpose(1, 2)
        tokens = tokens + self.attn(tokens, tokens, tokens, need_weights=False)[0]
        return self.head(tokens.mean(1))


def target():
    torch.manual_seed(0)
    model = TinyVisionBlock()
    model.eval()
    return [
        (model, (torch.randn(2, 3, 6, 5),), {}),
        (model, (torch.randn(3, 3, 4, 7),), {}),
    ]


EXPECT = ("none: the cache is a Python attribute compared by shape (static under compile) and rebuilt with "
          "ordinary tensor ops; `Tensor.type()` strings and the formatted `assert` on sizes are static too, so "
          "I expect no break (at most a recompile per input shape)")
