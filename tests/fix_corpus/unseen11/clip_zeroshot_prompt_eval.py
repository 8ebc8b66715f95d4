"""Zero-shot CLIP evaluation with prompt ensembling (openai/CLIP: the "Prompt Engineering for ImageNet" notebook,
`notebooks/Prompt_Engineering_for_ImageNet.ipynb` (read from its exported script
`docs/src/notebooks/Prompt_Engineering_for_ImageNet.py`): `zeroshot_classifier`, `accuracy` and the evaluation
cell; `clip/clip.py`: `tokenize`; `clip/model.py`: `LayerNorm`, `QuickGELU`, `ResidualAttentionBlock`,
`Transformer`, `VisionTransformer`, `CLIP`). `zeroshot_classifier` loops over the class names under
`torch.no_grad()` through `tqdm`, formats every template with the class name (a list comprehension of
`template.format(classname)`), tokenises them on the host (`tokenize`: a comprehension of
`[sot_token] + tokenizer.encode(text) + [eot_token]`, `torch.zeros(len(all_tokens), context_length)`, a length check
that raises a `RuntimeError` with an f-string, and per-row `result[i, :len(tokens)] = torch.tensor(tokens)`), encodes
them (`encode_text` gathers the EOT position with `x[torch.arange(x.shape[0]), text.argmax(dim=-1)]`), normalises in
place and stacks the class embeddings; each `ResidualAttentionBlock.attention` re-assigns
`self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device)` on the module; `LayerNorm` (the fp16 subclass)
casts through float32. The evaluation cell loops over the loader through `tqdm`, computes logits against the
zero-shot weights and accumulates `accuracy`, which returns
`[float(correct[:k].reshape(-1).float().sum(0, keepdim=True).cpu().numpy()) for k in topk]`, then prints
f-string percentages.
Adaptations: the pretrained ViT-B/32 (`clip.load`, a download) is replaced by a randomly initialised `CLIP` built from
a small config (embedding 16, 16x16 images with 8x8 patches, one 64-wide vision layer, one 32-wide two-head text
layer, context length 40, vocabulary 64); the BPE `SimpleTokenizer` (its vocabulary file is a download, and `ftfy`
is not installed) is a minimal stand-in (`ByteTokenizer`: one token per UTF-8 byte, `<|startoftext|>`/
`<|endoftext|>` as the two highest ids, as in CLIP, so that `argmax` finds the EOT token); `tokenize` takes
`context_length=40`; `tqdm.notebook` is `tqdm`; the ImageNetV2 loader is a list of `(images, target)` batches;
`.cuda()` calls are dropped; current NumPy refuses `float()` of a one-element 1-d array, so `accuracy`
indexes `.cpu().numpy()[0]` before `float(...)` (a change for runnability). The notebook cells use a global `model`, kept as a module attribute set in the factory;
the evaluation cell becomes the function `evaluate` (an adaptation that also calls `zeroshot_classifier` and returns
the accuracies). The two calls use different class names, templates and images."""
from collections import OrderedDict
from typing import List, Tuple, Union

import numpy as np
import torch
import torch.nn as nn
from tqdm import tqdm


class ByteTokenizer:
    """Adaptation: stand-in for CLIP's BPE SimpleTokenizer (one token per UTF-8 byte)."""

    def __init__(self, vocab_size=64):
        self.encoder = {"<|startoftext|>": vocab_size - 2, "<|endoftext|>": vocab_size - 1}
        self.n_byte_tokens = vocab_size - 3

    def encode(self, text):
        return [1 + b % self.n_byte_tokens for b in text.lower().strip().encode("utf-8")]


_tokenizer = ByteTokenizer()


def tokenize(texts: Union[str, List[str]], context_length: int = 77, tokenizer: ByteTokenizer = _tokenizer) -> torch.LongTensor:
    """
    Returns the tokenized representation of given input string(s)

    Parameters
    ----------
    texts : Union[str, List[str]]
        An input string or a list of input strings to tokenize

    context_length : int
        The context length to use; all CLIP models use 77 as the context length

    Returns
    -------
    A two-dimensional tensor containing the resulting tokens, shape = [number of input strings, context_length]
    """
    if isinstance(texts, str):
        texts = [texts]

    sot_token = tokenizer.encoder["<|startoftext|>"]
    eot_token = tokenizer.encoder["<|endoftext|>"]
    all_tokens = [[sot_token] + tokenizer.encode(text) + [eot_token] for text in texts]
    result = torch.zeros(len(all_tokens), context_length, dtype=torch.long)

    for i, tokens in enumerate(all_tokens):
        if len(tokens) > context_length:
            raise RuntimeError(f"Input {texts[i]} is too long for context length {context_length}")
        result[i, :len(tokens)] = torch.tensor(tokens)

    return result


class LayerNorm(nn.LayerNorm):
    """Subclass torch's LayerNorm to handle fp16."""

    def forward(self, x: torch.Tensor):
        orig_type = x.dtype
        ret = super().forward(x.type(torch.float32))
        return ret.type(orig_type)


class QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model: int, n_head: int, attn_mask: torch.Tensor = None):
        super().__init__()

        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = LayerNorm(d_model)
        self.mlp = nn.Sequential(OrderedDict([
            ("c_fc", nn.Linear(d_model, d_model * 4)),
            ("gelu", QuickGELU()),
            ("c_proj", nn.Linear(d_model * 4, d_model))
        ]))
        self.ln_2 = LayerNorm(d_model)
        self.attn_mask = attn_mask

    def attention(self, x: torch.Tensor):
        self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device) if self.attn_mask is not None else None
        return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

    def forward(self, x: torch.Tensor):
        x = x + self.attention(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, attn_mask: torch.Tensor = None):
        super().__init__()
        self.width = width
        self.layers = layers
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, attn_mask) for _ in range(layers)])

    def forward(self, x: torch.Tensor):
        return self.resblocks(x)


class VisionTransformer(nn.Module):
    def __init__(self, input_resolution: int, patch_size: int, width: int, layers: int, heads: int, output_dim: int):
        super().__init__()
        self.input_resolution = input_resolution
        self.output_dim = output_dim
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=width, kernel_size=patch_size, stride=patch_size, bias=False)

        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((input_resolution // patch_size) ** 2 + 1, width))
        self.ln_pre = LayerNorm(width)

        self.transformer = Transformer(width, layers, heads)

        self.ln_post = LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x: torch.Tensor):
        x = self.conv1(x)  # shape = [*, width, grid, grid]
        x = x.reshape(x.shape[0], x.shape[1], -1)  # shape = [*, width, grid ** 2]
        x = x.permute(0, 2, 1)  # shape = [*, grid ** 2, width]
        x = torch.cat([self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype, device=x.device), x], dim=1)  # shape = [*, grid ** 2 + 1, width]
        x = x + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x)

        x = x.permute(1, 0, 2)  # NLD -> LND
        x = self.transformer(x)
        x = x.permute(1, 0, 2)  # LND -> NLD

        x = self.ln_post(x[:, 0, :])

        if self.proj is not None:
            x = x @ self.proj

        return x


class CLIP(nn.Module):
    def __init__(self,
                 embed_dim: int,
                 # vision
                 image_resolution: int,
                 vision_layers: Union[Tuple[int, int, int, int], int],
                 vision_width: int,
                 vision_patch_size: int,
                 # text
                 context_length: int,
                 vocab_size: int,
                 transformer_width: int,
                 transformer_heads: int,
                 transformer_layers: int
                 ):
        super().__init__()

        self.context_length = context_length

        vision_heads = vision_width // 64
        self.visual = VisionTransformer(
            input_resolution=image_resolution,
            patch_size=vision_patch_size,
            width=vision_width,
            layers=vision_layers,
            heads=vision_heads,
            output_dim=embed_dim
        )

        self.transformer = Transformer(
            width=transformer_width,
            layers=transformer_layers,
            heads=transformer_heads,
            attn_mask=self.build_attention_mask()
        )

        self.vocab_size = vocab_size
        self.token_embedding = nn.Embedding(vocab_size, transformer_width)
        self.positional_embedding = nn.Parameter(torch.empty(self.context_length, transformer_width))
        self.ln_final = LayerNorm(transformer_width)

        self.text_projection = nn.Parameter(torch.empty(transformer_width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

        self.initialize_parameters()

    def initialize_parameters(self):
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)

        proj_std = (self.transformer.width ** -0.5) * ((2 * self.transformer.layers) ** -0.5)
        attn_std = self.transformer.width ** -0.5
        fc_std = (2 * self.transformer.width) ** -0.5
        for block in self.transformer.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=attn_std)
            nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
            nn.init.normal_(block.mlp.c_fc.weight, std=fc_std)
            nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)

        if self.text_projection is not None:
            nn.init.normal_(self.text_projection, std=self.transformer.width ** -0.5)

    def build_attention_mask(self):
        # lazily create causal attention mask, with full attention between the vision tokens
        # pytorch uses additive attention mask; fill with -inf
        mask = torch.empty(self.context_length, self.context_length)
        mask.fill_(float("-inf"))
        mask.triu_(1)  # zero out the lower diagonal
        return mask

    @property
    def dtype(self):
        return self.visual.conv1.weight.dtype

    def encode_image(self, image):
        return self.visual(image.type(self.dtype))

    def encode_text(self, text):
        x = self.token_embedding(text).type(self.dtype)  # [batch_size, n_ctx, d_model]

        x = x + self.positional_embedding.type(self.dtype)
        x = x.permute(1, 0, 2)  # NLD -> LND
        x = self.transformer(x)
        x = x.permute(1, 0, 2)  # LND -> NLD
        x = self.ln_final(x).type(self.dtype)

        # x.shape = [batch_size, n_ctx, transformer.width]
        # take features from the eot embedding (eot_token is the highest number in each sequence)
        x = x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

        return x


model = None  # set by target(), as the notebook's global `model, preprocess = clip.load("ViT-B/32")`


def zeroshot_classifier(classnames, templates):
    with torch.no_grad():
        zeroshot_weights = []
        for classname in tqdm(classnames):  # BREAK
            texts = [template.format(classname) for template in templates] #format with class
            texts = tokenize(texts, context_length=40) #tokenize
            class_embeddings = model.encode_text(texts) #embed with text encoder
            class_embeddings /= class_embeddings.norm(dim=-1, keepdim=True)
            class_embedding = class_embeddings.mean(dim=0)
            class_embedding /= class_embedding.norm()
            zeroshot_weights.append(class_embedding)
        zeroshot_weights = torch.stack(zeroshot_weights, dim=1)
    return zeroshot_weights


def accuracy(output, target, topk=(1,)):
    pred = output.topk(max(topk), 1, True, True)[1].t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    return [float(correct[:k].reshape(-1).float().sum(0, keepdim=True).cpu().numpy()[0]) for k in topk]  # BREAK


def evaluate(loader, classnames, templates):
    """Adaptation: the notebook's evaluation cell (with the `zeroshot_classifier` call) as a function."""
    zeroshot_weights = zeroshot_classifier(classnames, templates)

    with torch.no_grad():
        top1, top5, n = 0., 0., 0.
        for i, (images, target) in enumerate(tqdm(loader)):  # BREAK

            # predict
            image_features = model.encode_image(images)
            image_features /= image_features.norm(dim=-1, keepdim=True)
            logits = 100. * image_features @ zeroshot_weights

            # measure accuracy
            acc1, acc5 = accuracy(logits, target, topk=(1, 5))
            top1 += acc1
            top5 += acc5
            n += images.size(0)

    top1 = (top1 / n) * 100
    top5 = (top5 / n) * 100

    print(f"Top-1 accuracy: {top1:.2f}")
    print(f"Top-5 accuracy: {top5:.2f}")
    return top1, top5, zeroshot_weights


def target():
    global model
    torch.manual_seed(0)
    model = CLIP(16, 16, 1, 64, 8, 40, 64, 32, 2, 1).eval()
    classes1 = ["tench", "goldfish", "shark", "hen", "ostrich", "newt"]
    templates1 = ["a photo of a {}.", "a bad photo of the {}.", "art of the {}."]
    classes2 = ["cat", "dog", "car", "tree", "boat", "plane", "frog"]
    templates2 = ["itap of a {}.", "a {} in a video game."]
    loader1 = [(torch.randn(4, 3, 16, 16), torch.tensor([0, 1, 2, 3])),
               (torch.randn(3, 3, 16, 16), torch.tensor([4, 5, 0]))]
    loader2 = [(torch.randn(5, 3, 16, 16), torch.tensor([6, 5, 4, 3, 2]))]
    return [(evaluate, (loader1, classes1, templates1), {}), (evaluate, (loader2, classes2, templates2), {})]


EXPECT = ("caller: tokenisation (`tokenize` with its per-row Python loop and string formatting) and the `tqdm`/"
          "`float(....cpu().numpy())` accuracy bookkeeping are host work around the encoders; compiling "
          "`model.encode_text`/`encode_image` and keeping the loops eager is the fix")
