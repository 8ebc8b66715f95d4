"""Wav2Vec2ForCTC loss: `flattened_targets = labels.masked_select(labels_mask)` (data-dependent length) and the
CTC loss called under `with torch.backends.cudnn.flags(enabled=False):`.

Origin: huggingface/transformers `src/transformers/loss/loss_ctc.py` (`ForCTCLoss`) and
`src/transformers/models/wav2vec2/modeling_wav2vec2.py` (`Wav2Vec2ForCTC.forward`,
`Wav2Vec2PreTrainedModel._get_feat_extract_output_lengths`); before the loss moved to `loss_ctc.py` the same lines
were inline in `Wav2Vec2ForCTC.forward` (and are in HuBERT/WavLM/Data2VecAudio/SEW `...ForCTC`). The wav2vec2
encoder is replaced by a two-layer conv feature extractor + projection with the original's conv kernel/stride
bookkeeping; the forward's `labels.max() >= vocab_size` validation is left out (the loss path is what is kept).
"""
import torch
import torch.nn as nn


def ForCTCLoss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    logit_lengths: torch.Tensor,
    blank_token_id: int,
    reduction: str = "mean",
    zero_infinity: bool = False,
    ignore_index: int = -100,
    **kwargs,
) -> torch.Tensor:
    """
    Compute the CTC (Connectionist Temporal Classification) loss.
    """
    labels = labels.to(logits.device)
    labels_mask = (labels != ignore_index) & (labels != blank_token_id)
    target_lengths = labels_mask.sum(-1)
    flattened_targets = labels.masked_select(labels_mask)  # BREAK

    # ctc_loss doesn't support fp16
    log_probs = nn.functional.log_softmax(logits, dim=-1, dtype=torch.float32).transpose(0, 1)

    with torch.backends.cudnn.flags(enabled=False):  # BREAK
        return nn.functional.ctc_loss(
            log_probs,
            flattened_targets,
            logit_lengths,
            target_lengths,
            blank=blank_token_id,
            reduction=reduction,
            zero_infinity=zero_infinity,
        )


class Wav2Vec2Config:
    def __init__(self):
        self.vocab_size = 12
        self.pad_token_id = 0
        self.hidden_size = 16
        self.conv_dim = (8, 8)
        self.conv_kernel = (10, 3)
        self.conv_stride = (5, 2)
        self.add_adapter = False
        self.final_dropout = 0.0
        self.ctc_loss_reduction = "mean"
        self.ctc_zero_infinity = True


class TinyWav2Vec2ForCTC(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        layers, in_dim = [], 1
        for dim, kernel, stride in zip(config.conv_dim, config.conv_kernel, config.conv_stride):
            layers += [nn.Conv1d(in_dim, dim, kernel, stride=stride), nn.GELU()]
            in_dim = dim
        self.feature_extractor = nn.Sequential(*layers)
        self.feature_projection = nn.Linear(in_dim, config.hidden_size)
        self.dropout = nn.Dropout(config.final_dropout)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)

    @property
    def loss_function(self):
        return ForCTCLoss

    def _get_feat_extract_output_lengths(self, input_lengths, add_adapter=None):
        """
        Computes the output length of the convolutional layers
        """

        add_adapter = self.config.add_adapter if add_adapter is None else add_adapter

        def _conv_out_length(input_length, kernel_size, stride):
            # 1D convolutional layer output length formula taken
            # from https://pytorch.org/docs/stable/generated/torch.nn.Conv1d.html
            return torch.div(input_length - kernel_size, stride, rounding_mode="floor") + 1

        for kernel_size, stride in zip(self.config.conv_kernel, self.config.conv_stride):
            input_lengths = _conv_out_length(input_lengths, kernel_size, stride)

        return input_lengths

    def forward(self, input_values, attention_mask=None, labels=None):
        extract_features = self.feature_extractor(input_values[:, None]).transpose(1, 2)
        hidden_states = self.feature_projection(extract_features)
        hidden_states = self.dropout(hidden_states)

        logits = self.lm_head(hidden_states)

        loss = None
        if labels is not None:
            # retrieve loss input_lengths from attention_mask
            attention_mask = (
                attention_mask if attention_mask is not None else torch.ones_like(input_values, dtype=torch.long)
            )
            input_lengths = self._get_feat_extract_output_lengths(attention_mask.sum(-1)).to(torch.long)
            loss = self.loss_function(
                logits=logits,
                labels=labels,
                logit_lengths=input_lengths,
                blank_token_id=self.config.pad_token_id,
                reduction=self.config.ctc_loss_reduction,
                zero_infinity=self.config.ctc_zero_infinity,
            )

        return loss, logits


def target():
    torch.manual_seed(0)
    model = TinyWav2Vec2ForCTC(Wav2Vec2Config())
    # 400 samples -> 78 conv frames -> 38 frames; labels padded with -100 (the HF processor's pad)
    wav1, wav2 = torch.randn(2, 400), torch.randn(2, 400)
    mask1 = torch.tensor([[1] * 400, [1] * 320 + [0] * 80])
    mask2 = torch.tensor([[1] * 360 + [0] * 40, [1] * 400])
    labels1 = torch.tensor([[3, 5, 5, 7, 2, -100, -100], [4, 4, 9, 1, 11, 6, 2]])
    labels2 = torch.tensor([[8, 1, 2, 3, -100, -100, -100], [5, 10, 7, 7, 3, 9, -100]])
    return [
        (model, (wav1,), {"attention_mask": mask1, "labels": labels1}),
        (model, (wav2,), {"attention_mask": mask2, "labels": labels2}),
    ]


EXPECT = ("rewrite: pass the padded `(batch, max_len)` labels to `ctc_loss` (it accepts padded targets with "
          "`target_lengths`) instead of `labels.masked_select(labels_mask)`, and drop the CUDA-only "
          "`cudnn.flags` context on this path")
