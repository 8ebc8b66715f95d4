"""Vector quantisation from CompVis/taming-transformers (`taming/modules/vqvae/quantize.py`: `VectorQuantizer2` with
index remapping (`remap_to_used`: broadcast `==` match, `argmax`, unknown indices replaced by `torch.randint` through
boolean-mask assignment; `unmap_to_all`: boolean-mask zeroing and `gather` of `used[None,:][inds.shape[0]*[0],:]`),
the `legacy` loss branch, straight-through `z + (z_q - z).detach()`, `sane_index_shape` reshape and
`get_codebook_entry`; `GumbelQuantize` (`self.training` choice of `hard`, `F.gumbel_softmax`, `einsum` to the
codebook, KL term, `remap_to_used` of the argmax, `use_vqinterface` return tuple) and its `get_codebook_entry`
(`rearrange` of flat indices, `F.one_hot(...).permute`, `einsum`)). The called function runs a VQGAN-style
`encode` (encoder, `quant_conv`, quantize) and `decode` (`post_quant_conv`, decoder) and looks the codes up again
through `get_codebook_entry`, for both quantizers.
Adaptations: `einops.rearrange` (einops not installed) is a small stand-in handling the patterns used here;
`np.load(self.remap)` reads the `used` index array from an in-memory stand-in (`np_load`, no file); the encoder and
decoder are small conv stand-ins, and `VQModel.encode`/`decode` (`taming/models/vqgan.py`, not opened) are written
from the collector's knowledge as plain functions; sizes are small (32 codes of width 4, 4x4 latents). So that a
call repeats, the called function `quantize_round_trip` seeds torch (the random unknown-index replacement and the
Gumbel noise draw from it); the modules' weights are not changed. It returns the reconstructions, the losses and the
indices."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import einsum


# ---- stand-ins: einops.rearrange and np.load of the remap file
def rearrange(t, pattern, **sizes):
    if pattern == 'b c h w -> b h w c':
        return t.permute(0, 2, 3, 1)
    if pattern == 'b h w c -> b c h w':
        return t.permute(0, 3, 1, 2)
    if pattern == 'n d -> d n':
        return t.permute(1, 0)
    if pattern == '(b h w) -> b h w':
        return t.reshape(sizes['b'], sizes['h'], sizes['w'])
    raise NotImplementedError(pattern)


REMAP_FILES = {"used_codes.npy": np.arange(0, 32, 2, dtype=np.int64)}


def np_load(path):
    return REMAP_FILES[path]


# ---- taming/modules/vqvae/quantize.py
class GumbelQuantize(nn.Module):
    """
    credit to @karpathy: https://github.com/karpathy/deep-vector-quantization/blob/main/model.py (thanks!)
    Gumbel Softmax trick quantizer
    Categorical Reparameterization with Gumbel-Softmax, Jang et al. 2016
    https://arxiv.org/abs/1611.01144
    """
    def __init__(self, num_hiddens, embedding_dim, n_embed, straight_through=True,
                 kl_weight=5e-4, temp_init=1.0, use_vqinterface=True,
                 remap=None, unknown_index="random"):
        super().__init__()

        self.embedding_dim = embedding_dim
        self.n_embed = n_embed

        self.straight_through = straight_through
        self.temperature = temp_init
        self.kl_weight = kl_weight

        self.proj = nn.Conv2d(num_hiddens, n_embed, 1)
        self.embed = nn.Embedding(n_embed, embedding_dim)

        self.use_vqinterface = use_vqinterface

        self.remap = remap
        if self.remap is not None:
            self.register_buffer("used", torch.tensor(np_load(self.remap)))
            self.re_embed = self.used.shape[0]
            self.unknown_index = unknown_index # "random" or "extra" or integer
            if self.unknown_index == "extra":
                self.unknown_index = self.re_embed
                self.re_embed = self.re_embed+1
            print(f"Remapping {self.n_embed} indices to {self.re_embed} indices. "
                  f"Using {self.unknown_index} for unknown indices.")
        else:
            self.re_embed = n_embed

    def remap_to_used(self, inds):
        ishape = inds.shape
        assert len(ishape)>1
        inds = inds.reshape(ishape[0],-1)
        used = self.used.to(inds)
        match = (inds[:,:,None]==used[None,None,...]).long()
        new = match.argmax(-1)
        unknown = match.sum(2)<1
        if self.unknown_index == "random":
            new[unknown]=torch.randint(0,self.re_embed,size=new[unknown].shape).to(device=new.device)
        else:
            new[unknown] = self.unknown_index
        return new.reshape(ishape)

    def unmap_to_all(self, inds):
        ishape = inds.shape
        assert len(ishape)>1
        inds = inds.reshape(ishape[0],-1)
        used = self.used.to(inds)
        if self.re_embed > self.used.shape[0]: # extra token
            inds[inds>=self.used.shape[0]] = 0 # simply set to zero
        back=torch.gather(used[None,:][inds.shape[0]*[0],:], 1, inds)
        return back.reshape(ishape)

    def forward(self, z, temp=None, return_logits=False):
        # force hard = True when we are in eval mode, as we must quantize. actually, always true seems to work
        hard = self.straight_through if self.training else True
        temp = self.temperature if temp is None else temp

        logits = self.proj(z)
        if self.remap is not None:
            # continue only with used logits
            full_zeros = torch.zeros_like(logits)
            logits = logits[:,self.used,...]

        soft_one_hot = F.gumbel_softmax(logits, tau=temp, dim=1, hard=hard)
        if self.remap is not None:
            # go back to all entries but unused set to zero
            full_zeros[:,self.used,...] = soft_one_hot
            soft_one_hot = full_zeros
        z_q = einsum('b n h w, n d -> b d h w', soft_one_hot, self.embed.weight)

        # + kl divergence to the prior loss
        qy = F.softmax(logits, dim=1)
        diff = self.kl_weight * torch.sum(qy * torch.log(qy * self.n_embed + 1e-10), dim=1).mean()

        ind = soft_one_hot.argmax(dim=1)
        if self.remap is not None:
            ind = self.remap_to_used(ind)
        if self.use_vqinterface:
            if return_logits:
                return z_q, diff, (None, None, ind), logits
            return z_q, diff, (None, None, ind)
        return z_q, diff, ind

    def get_codebook_entry(self, indices, shape):
        b, h, w, c = shape
        assert b*h*w == indices.shape[0]
        indices = rearrange(indices, '(b h w) -> b h w', b=b, h=h, w=w)
        if self.remap is not None:
            indices = self.unmap_to_all(indices)
        one_hot = F.one_hot(indices, num_classes=self.n_embed).permute(0, 3, 1, 2).float()
        z_q = einsum('b n h w, n d -> b d h w', one_hot, self.embed.weight)
        return z_q


class VectorQuantizer2(nn.Module):
    """
    Improved version over VectorQuantizer, can be used as a drop-in replacement. Mostly
    avoids costly matrix multiplications and allows for post-hoc remapping of indices.
    """
    # NOTE: due to a bug the beta term was applied to the wrong term. for
    # backwards compatibility we use the buggy version by default, but you can
    # specify legacy=False to fix it.
    def __init__(self, n_e, e_dim, beta, remap=None, unknown_index="random",
                 sane_index_shape=False, legacy=True):
        super().__init__()
        self.n_e = n_e
        self.e_dim = e_dim
        self.beta = beta
        self.legacy = legacy

        self.embedding = nn.Embedding(self.n_e, self.e_dim)
        self.embedding.weight.data.uniform_(-1.0 / self.n_e, 1.0 / self.n_e)

        self.remap = remap
        if self.remap is not None:
            self.register_buffer("used", torch.tensor(np_load(self.remap)))
            self.re_embed = self.used.shape[0]
            self.unknown_index = unknown_index # "random" or "extra" or integer
            if self.unknown_index == "extra":
                self.unknown_index = self.re_embed
                self.re_embed = self.re_embed+1
            print(f"Remapping {self.n_e} indices to {self.re_embed} indices. "
                  f"Using {self.unknown_index} for unknown indices.")
        else:
            self.re_embed = n_e

        self.sane_index_shape = sane_index_shape

    def remap_to_used(self, inds):
        ishape = inds.shape
        assert len(ishape)>1
        inds = inds.reshape(ishape[0],-1)
        used = self.used.to(inds)
        match = (inds[:,:,None]==used[None,None,...]).long()
        new = match.argmax(-1)
        unknown = match.sum(2)<1
        if self.unknown_index == "random":
            new[unknown]=torch.randint(0,self.re_embed,size=new[unknown].shape).to(device=new.device)  # BREAK
        else:
            new[unknown] = self.unknown_index
        return new.reshape(ishape)

    def unmap_to_all(self, inds):
        ishape = inds.shape
        assert len(ishape)>1
        inds = inds.reshape(ishape[0],-1)
        used = self.used.to(inds)
        if self.re_embed > self.used.shape[0]: # extra token
            inds[inds>=self.used.shape[0]] = 0 # simply set to zero
        back=torch.gather(used[None,:][inds.shape[0]*[0],:], 1, inds)
        return back.reshape(ishape)

    def forward(self, z, temp=None, rescale_logits=False, return_logits=False):
        assert temp is None or temp==1.0, "Only for interface compatible with Gumbel"
        assert rescale_logits==False, "Only for interface compatible with Gumbel"
        assert return_logits==False, "Only for interface compatible with Gumbel"
        # reshape z -> (batch, height, width, channel) and flatten
        z = rearrange(z, 'b c h w -> b h w c').contiguous()
        z_flattened = z.view(-1, self.e_dim)
        # distances from z to embeddings e_j (z - e)^2 = z^2 + e^2 - 2 e * z

        d = torch.sum(z_flattened ** 2, dim=1, keepdim=True) + \
            torch.sum(self.embedding.weight**2, dim=1) - 2 * \
            torch.einsum('bd,dn->bn', z_flattened, rearrange(self.embedding.weight, 'n d -> d n'))

        min_encoding_indices = torch.argmin(d, dim=1)
        z_q = self.embedding(min_encoding_indices).view(z.shape)
        perplexity = None
        min_encodings = None

        # compute loss for embedding
        if not self.legacy:
            loss = self.beta * torch.mean((z_q.detach()-z)**2) + \
                   torch.mean((z_q - z.detach()) ** 2)
        else:
            loss = torch.mean((z_q.detach()-z)**2) + self.beta * \
                   torch.mean((z_q - z.detach()) ** 2)

        # preserve gradients
        z_q = z + (z_q - z).detach()

        # reshape back to match original input shape
        z_q = rearrange(z_q, 'b h w c -> b c h w').contiguous()

        if self.remap is not None:
            min_encoding_indices = min_encoding_indices.reshape(z.shape[0],-1) # add batch axis
            min_encoding_indices = self.remap_to_used(min_encoding_indices)
            min_encoding_indices = min_encoding_indices.reshape(-1,1) # flatten

        if self.sane_index_shape:
            min_encoding_indices = min_encoding_indices.reshape(
                z_q.shape[0], z_q.shape[2], z_q.shape[3])

        return z_q, loss, (perplexity, min_encodings, min_encoding_indices)

    def get_codebook_entry(self, indices, shape):
        # shape specifying (batch, height, width, channel)
        if self.remap is not None:
            indices = indices.reshape(shape[0],-1) # add batch axis
            indices = self.unmap_to_all(indices)
            indices = indices.reshape(-1) # flatten again

        # get quantized latent vectors
        z_q = self.embedding(indices)

        if shape is not None:
            z_q = z_q.view(shape)
            # reshape back to match original input shape
            z_q = z_q.permute(0, 3, 1, 2).contiguous()

        return z_q


# ---- stand-in VQGAN parts (taming/models/vqgan.py VQModel, from knowledge)
class TinyVQModel(nn.Module):
    def __init__(self, quantize, z_channels=8, embed_dim=4):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.SiLU(),
                                     nn.Conv2d(16, z_channels, 3, stride=2, padding=1))
        self.decoder = nn.Sequential(nn.ConvTranspose2d(z_channels, 16, 4, stride=2, padding=1), nn.SiLU(),
                                     nn.ConvTranspose2d(16, 3, 4, stride=2, padding=1))
        self.quantize = quantize
        self.quant_conv = nn.Conv2d(z_channels, embed_dim, 1)
        self.post_quant_conv = nn.Conv2d(embed_dim, z_channels, 1)

    def encode(self, x):
        h = self.encoder(x)
        h = self.quant_conv(h)
        quant, emb_loss, info = self.quantize(h)
        return quant, emb_loss, info

    def decode(self, quant):
        quant = self.post_quant_conv(quant)
        dec = self.decoder(quant)
        return dec

    def forward(self, input):
        quant, diff, _ = self.encode(input)
        dec = self.decode(quant)
        return dec, diff


def quantize_round_trip(vqmodel, gumbel_model, x):
    torch.manual_seed(0)  # adaptation: random unknown-index remap and Gumbel noise  # BREAK
    dec, diff = vqmodel(x)
    quant, emb_loss, (_, _, indices) = vqmodel.encode(x)
    b, c, h, w = quant.shape
    z_q = vqmodel.quantize.get_codebook_entry(indices.reshape(-1), (b, h, w, c))
    dec_from_codes = vqmodel.decode(z_q)

    h_g = gumbel_model.quant_conv(gumbel_model.encoder(x))
    zq_g, diff_g, (_, _, ind_g) = gumbel_model.quantize(h_g)
    zq_codes = gumbel_model.quantize.get_codebook_entry(ind_g.reshape(-1), (b, h, w, c))
    dec_g = gumbel_model.decode(zq_g)
    return dec, diff, indices, dec_from_codes, diff_g, ind_g, dec_g, zq_codes


def target():
    torch.manual_seed(0)
    vq = VectorQuantizer2(32, 4, beta=0.25, remap="used_codes.npy", unknown_index="random", sane_index_shape=True)
    vqmodel = TinyVQModel(vq, z_channels=8, embed_dim=4)
    gq = GumbelQuantize(8, 4, 32, kl_weight=5e-4, temp_init=0.9, remap="used_codes.npy", unknown_index="extra")
    gumbel_model = TinyVQModel(gq, z_channels=8, embed_dim=8)
    gumbel_model.quantize.embed = nn.Embedding(32, 8)
    x1, x2 = torch.randn(2, 3, 16, 16), torch.randn(3, 3, 16, 16)
    return [
        (quantize_round_trip, (vqmodel, gumbel_model, x1), {}),
        (quantize_round_trip, (vqmodel, gumbel_model, x2), {}),
    ]


EXPECT = ("extract: the encoder/decoder and the quantizers' distance, argmin, embedding and loss math compile; "
          "`remap_to_used`'s boolean-mask write of a `torch.randint` draw sized by the number of unknown indices "
          "(a data-dependent size, and a random stream a value select would change) goes into a helper under an "
          "escape hatch, as does the mask-indexed zeroing in `unmap_to_all`")
