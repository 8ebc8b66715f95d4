"""ClipLoss: label cache `if self.prev_num_logits != num_logits or device not in self.labels:` writing `self.labels[device]` and `self.prev_num_logits` in forward (open_clip loss.py) (control)."""
import torch
import torch.nn as nn
from torch.nn import functional as F


class ClipLoss(nn.Module):

    def __init__(
            self,
            local_loss=False,
            gather_with_grad=False,
            cache_labels=False,
            rank=0,
            world_size=1,
            use_horovod=False,
    ):
        super().__init__()
        self.local_loss = local_loss
        self.gather_with_grad = gather_with_grad
        self.cache_labels = cache_labels
        self.rank = rank
        self.world_size = world_size
        self.use_horovod = use_horovod

        # cache state
        self.prev_num_logits = 0
        self.labels = {}

    def forward(self, image_features, text_features, logit_scale):
        device = image_features.device
        if self.world_size > 1:
            raise NotImplementedError("gather_features is not used in this adaptation")
        else:
            logits_per_image = logit_scale * image_features @ text_features.T
            logits_per_text = logit_scale * text_features @ image_features.T

        # calculated ground-truth and cache if enabled
        num_logits = logits_per_image.shape[0]
        if self.prev_num_logits != num_logits or device not in self.labels:  # NO BREAK in torch 2.13
            labels = torch.arange(num_logits, device=device, dtype=torch.long)
            if self.world_size > 1 and self.local_loss:
                labels = labels + num_logits * self.rank
            if self.cache_labels:
                self.labels[device] = labels
                self.prev_num_logits = num_logits
        else:
            labels = self.labels[device]

        total_loss = (
            F.cross_entropy(logits_per_image, labels) +
            F.cross_entropy(logits_per_text, labels)
            ) / 2
        return total_loss


class TinyCLIPStep(nn.Module):
    def __init__(self, img_dim=12, vocab=20, embed_dim=8):
        super().__init__()
        self.visual = nn.Linear(img_dim, embed_dim)
        self.token_embedding = nn.Embedding(vocab, embed_dim)
        self.text_projection = nn.Linear(embed_dim, embed_dim)
        self.logit_scale = nn.Parameter(torch.ones([]) * 2.659)
        self.loss = ClipLoss(cache_labels=True)

    def forward(self, images, texts):
        image_features = F.normalize(self.visual(images), dim=-1)
        text_features = F.normalize(self.text_projection(self.token_embedding(texts).mean(1)), dim=-1)
        return self.loss(image_features, text_features, self.logit_scale.exp())


def target():
    torch.manual_seed(0)
    model = TinyCLIPStep()
    return [
        (model, (torch.randn(4, 12), torch.randint(0, 20, (4, 5))), {}),
        (model, (torch.randn(4, 12), torch.randint(0, 20, (4, 5))), {}),
        (model, (torch.randn(6, 12), torch.randint(0, 20, (6, 5))), {}),
    ]


EXPECT = ("none: no break expected: `self.prev_num_logits != num_logits or device not in self.labels` compares "
          "Python ints and looks up a dict keyed by a device, and caching the labels is a module-attribute side "
          "effect dynamo can replay; a new batch size only recompiles")
