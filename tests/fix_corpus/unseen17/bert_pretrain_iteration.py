"""BERT pre-training iterations from codertimo/BERT-pytorch (`bert_pytorch/trainer/pretrain.py` `BERTTrainer`:
`__init__`, `train`, `test`, `iteration`; `bert_pytorch/trainer/optim_schedule.py` `ScheduledOptim`).
`iteration` loops over `enumerate(data_loader)`, moves the batch with a dict comprehension, calls
`self.model.forward(data["bert_input"], data["segment_label"])`, adds the next-sentence and masked-LM NLL losses,
and only `if train:` zeroes, backpropagates and calls `step_and_update_lr()` (which sets every param group's `lr`
from `np.power`/`np.min` of the step count); it then counts correct next-sentence predictions with
`.sum().item()`, accumulates `loss.item()`, builds a `post_fix` dict with four more `.item()`/Python divisions
and a `"[%d/%d]"` string, prints it every `log_freq` iterations and prints the epoch summary.
`BERTTrainer.__init__` checks `torch.cuda.is_available()`, wraps the model in `BERTLM`, has a `DataParallel`
branch, builds the optimizer and schedule, the two `NLLLoss` criteria and prints the parameter count with
`sum([p.nelement() for p in ...])`.
Adaptations: the model files (`bert_pytorch/model/bert.py`, `language_model.py`, `embedding/*`, `attention/*`,
`transformer.py`, `utils/*`) were not opened: `BERT`, `BERTLM`, `NextSentencePrediction`, `MaskedLanguageModel`,
`BERTEmbedding`, `TransformerBlock` with its attention, `GELU` and sublayer connections are written from the
collector's knowledge of that repository and shrunk (hidden 16, 2 layers, 2 heads, vocabulary 30, sequences of
12); the repository's own `AdamW` (`trainer/optimizer/adamw.py`, not opened) is `torch.optim.AdamW`; the
`DataLoader` over `BERTDataset` is a list of batch dicts made in the factory. `iteration` returns
`avg_loss / len(data_loader)` and the accuracy it prints, and `train`/`test` return that (the originals return nothing). The called function
`pretrain` is the collector's driver for `__main__.train`'s loop: it seeds torch (dropout), builds the `BERT`
model, loads the factory's initial weights and builds the trainer itself (so that a call repeats exactly), then
runs `trainer.train(epoch)` and `trainer.test(epoch)`; `trainer.save` (a file write) is not called."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- bert_pytorch/model (stand-ins written from knowledge)
class GELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


class Attention(nn.Module):
    def forward(self, query, key, value, mask=None, dropout=None):
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = F.softmax(scores, dim=-1)
        if dropout is not None:
            p_attn = dropout(p_attn)
        return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        super().__init__()  # BREAK
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.linear_layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(3)])  # BREAK
        self.output_linear = nn.Linear(d_model, d_model)
        self.attention = Attention()
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        batch_size = query.size(0)
        query, key, value = [l(x).view(batch_size, -1, self.h, self.d_k).transpose(1, 2)
                             for l, x in zip(self.linear_layers, (query, key, value))]
        x, attn = self.attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(batch_size, -1, self.h * self.d_k)
        return self.output_linear(x)


class SublayerConnection(nn.Module):
    def __init__(self, size, dropout):
        super(SublayerConnection, self).__init__()  # BREAK
        self.norm = nn.LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super(PositionwiseFeedForward, self).__init__()  # BREAK
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = GELU()

    def forward(self, x):
        return self.w_2(self.dropout(self.activation(self.w_1(x))))


class TransformerBlock(nn.Module):
    def __init__(self, hidden, attn_heads, feed_forward_hidden, dropout):
        super().__init__()  # BREAK
        self.attention = MultiHeadedAttention(h=attn_heads, d_model=hidden)
        self.feed_forward = PositionwiseFeedForward(d_model=hidden, d_ff=feed_forward_hidden, dropout=dropout)
        self.input_sublayer = SublayerConnection(size=hidden, dropout=dropout)
        self.output_sublayer = SublayerConnection(size=hidden, dropout=dropout)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x, mask):
        x = self.input_sublayer(x, lambda _x: self.attention.forward(_x, _x, _x, mask=mask))
        x = self.output_sublayer(x, self.feed_forward)
        return self.dropout(x)


class PositionalEmbedding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()  # BREAK
        pe = torch.zeros(max_len, d_model).float()
        pe.require_grad = False
        position = torch.arange(0, max_len).float().unsqueeze(1)
        div_term = (torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model)).exp()
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer('pe', pe)

    def forward(self, x):
        return self.pe[:, :x.size(1)]


class BERTEmbedding(nn.Module):
    def __init__(self, vocab_size, embed_size, dropout=0.1):
        super().__init__()  # BREAK
        self.token = nn.Embedding(vocab_size, embed_size, padding_idx=0)  # BREAK
        self.position = PositionalEmbedding(d_model=embed_size)
        self.segment = nn.Embedding(3, embed_size, padding_idx=0)
        self.dropout = nn.Dropout(p=dropout)
        self.embed_size = embed_size

    def forward(self, sequence, segment_label):
        x = self.token(sequence) + self.position(sequence) + self.segment(segment_label)
        return self.dropout(x)


class BERT(nn.Module):
    def __init__(self, vocab_size, hidden=768, n_layers=12, attn_heads=12, dropout=0.1):
        super().__init__()  # BREAK
        self.hidden = hidden
        self.n_layers = n_layers
        self.attn_heads = attn_heads
        self.feed_forward_hidden = hidden * 4
        self.embedding = BERTEmbedding(vocab_size=vocab_size, embed_size=hidden)
        self.transformer_blocks = nn.ModuleList(
            [TransformerBlock(hidden, attn_heads, hidden * 4, dropout) for _ in range(n_layers)])

    def forward(self, x, segment_info):
        mask = (x > 0).unsqueeze(1).repeat(1, x.size(1), 1).unsqueeze(1)
        x = self.embedding(x, segment_info)
        for transformer in self.transformer_blocks:
            x = transformer.forward(x, mask)
        return x


class NextSentencePrediction(nn.Module):
    def __init__(self, hidden):
        super().__init__()  # BREAK
        self.linear = nn.Linear(hidden, 2)  # BREAK
        self.softmax = nn.LogSoftmax(dim=-1)

    def forward(self, x):
        return self.softmax(self.linear(x[:, 0]))


class MaskedLanguageModel(nn.Module):
    def __init__(self, hidden, vocab_size):
        super().__init__()  # BREAK
        self.linear = nn.Linear(hidden, vocab_size)
        self.softmax = nn.LogSoftmax(dim=-1)

    def forward(self, x):
        return self.softmax(self.linear(x))


class BERTLM(nn.Module):
    def __init__(self, bert: BERT, vocab_size):
        super().__init__()  # BREAK
        self.bert = bert
        self.next_sentence = NextSentencePrediction(self.bert.hidden)
        self.mask_lm = MaskedLanguageModel(self.bert.hidden, vocab_size)

    def forward(self, x, segment_label):
        x = self.bert(x, segment_label)
        return self.next_sentence(x), self.mask_lm(x)


AdamW = torch.optim.AdamW


# ---- bert_pytorch/trainer/optim_schedule.py
class ScheduledOptim():
    '''A simple wrapper class for learning rate scheduling'''

    def __init__(self, optimizer, d_model, n_warmup_steps):
        self._optimizer = optimizer
        self.n_warmup_steps = n_warmup_steps
        self.n_current_steps = 0
        self.init_lr = np.power(d_model, -0.5)

    def step_and_update_lr(self):
        "Step with the inner optimizer"
        self._update_learning_rate()
        self._optimizer.step()  # BREAK

    def zero_grad(self):
        "Zero out the gradients by the inner optimizer"
        self._optimizer.zero_grad()  # BREAK

    def _get_lr_scale(self):
        return np.min([
            np.power(self.n_current_steps, -0.5),
            np.power(self.n_warmup_steps, -1.5) * self.n_current_steps])

    def _update_learning_rate(self):
        ''' Learning rate scheduling per step '''

        self.n_current_steps += 1
        lr = self.init_lr * self._get_lr_scale()

        for param_group in self._optimizer.param_groups:
            param_group['lr'] = lr


# ---- bert_pytorch/trainer/pretrain.py
class BERTTrainer:
    """
    BERTTrainer make the pretrained BERT model with two LM training method.

        1. Masked Language Model : 3.3.1 Task #1: Masked LM
        2. Next Sentence prediction : 3.3.2 Task #2: Next Sentence Prediction

    please check the details on README.md with simple example.

    """

    def __init__(self, bert: BERT, vocab_size: int,
                 train_dataloader, test_dataloader = None,
                 lr: float = 1e-4, betas=(0.9, 0.999), weight_decay: float = 0.01, warmup_steps=10000,
                 with_cuda: bool = True, cuda_devices=None, log_freq: int = 10):
        # Setup cuda device for BERT training, argument -c, --cuda should be true
        cuda_condition = torch.cuda.is_available() and with_cuda
        self.device = torch.device("cuda:0" if cuda_condition else "cpu")

        # This BERT model will be saved every epoch
        self.bert = bert
        # Initialize the BERT Language Model, with BERT model
        self.model = BERTLM(bert, vocab_size).to(self.device)

        # Distributed GPU training if CUDA can detect more than 1 GPU
        if with_cuda and torch.cuda.device_count() > 1:
            print("Using %d GPUS for BERT" % torch.cuda.device_count())
            self.model = nn.DataParallel(self.model, device_ids=cuda_devices)

        # Setting the train and test data loader
        self.train_data = train_dataloader
        self.test_data = test_dataloader

        # Setting the Adam optimizer with hyper-param
        self.optim = AdamW(self.model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)  # BREAK
        self.optim_schedule = ScheduledOptim(self.optim, self.bert.hidden, n_warmup_steps=warmup_steps)

        # Using Negative Log Likelihood Loss function for predicting the masked_token
        self.masked_criterion = nn.NLLLoss(ignore_index=0)
        self.next_criterion = nn.NLLLoss()

        self.log_freq = log_freq

        print("Total Parameters:", sum([p.nelement() for p in self.model.parameters()]))

    def train(self, epoch):
        return self.iteration(epoch, self.train_data)

    def test(self, epoch):
        return self.iteration(epoch, self.test_data, train=False)

    def iteration(self, epoch, data_loader, train=True):
        """
        loop over the data_loader for training or testing
        if on train status, backward operation is activated
        and also auto save the model every peoch

        :param epoch: current epoch index
        :param data_loader: torch.utils.data.DataLoader for iteration
        :param train: boolean value of is train or test
        :return: None
        """
        str_code = "train" if train else "test"

        avg_loss = 0.0
        total_correct = 0
        total_element = 0

        for i, data in enumerate(data_loader):
            # 0. batch_data will be sent into the device(GPU or cpu)
            data = {key: value.to(self.device) for key, value in data.items()}

            # 1. forward the next_sentence_prediction and masked_lm model
            next_sent_output, mask_lm_output = self.model.forward(data["bert_input"], data["segment_label"])

            # 2-1. NLL(negative log likelihood) loss of is_next classification result
            next_loss = self.next_criterion(next_sent_output, data["is_next"])

            # 2-2. NLLLoss of predicting masked token word
            mask_loss = self.masked_criterion(mask_lm_output.transpose(1, 2), data["bert_label"])

            # 2-3. Adding next_loss and mask_loss : 3.4 Pre-training Procedure
            loss = next_loss + mask_loss

            # 3. backward and optimization only in train
            if train:
                self.optim_schedule.zero_grad()
                loss.backward()
                self.optim_schedule.step_and_update_lr()

            # next sentence prediction accuracy
            correct = next_sent_output.argmax(dim=-1).eq(data["is_next"]).sum().item()  # BREAK
            avg_loss += loss.item()
            total_correct += correct
            total_element += data["is_next"].nelement()

            post_fix = {
                "epoch": epoch,
                "iter": "[%d/%d]" % (i, len(data_loader)),
                "avg_loss": avg_loss / (i + 1),
                "mask_loss": mask_loss.item(),
                "next_loss": next_loss.item(),
                "avg_next_acc": total_correct / total_element * 100,
                "loss": loss.item()
            }

            if i % self.log_freq == 0:
                print(post_fix)

                # Logging for PaperSpace matrix monitor
                # index = epoch * len(data_loader) + i
                # for code in ["avg_loss", "mask_loss", "next_loss", "avg_next_acc"]:
                #     print(json.dumps({"chart": code, "y": post_fix[code], "x": index}))

        print("EP%d_%s, avg_loss=" % (epoch, str_code), avg_loss / len(data_loader), "total_acc=",
              total_correct * 100.0 / total_element)
        return avg_loss / len(data_loader), total_correct * 100.0 / total_element


# ---- __main__.train (collector's driver)
def pretrain(initial_state, vocab_size, train_data, test_data, epoch, lr=1e-3, seed=0):
    torch.manual_seed(seed)  # BREAK
    bert = BERT(vocab_size, hidden=16, n_layers=2, attn_heads=2)
    bert.load_state_dict(initial_state)  # BREAK
    trainer = BERTTrainer(bert, vocab_size, train_dataloader=train_data, test_dataloader=test_data,
                          lr=lr, betas=(0.9, 0.999), weight_decay=0.01, warmup_steps=4,
                          with_cuda=False, cuda_devices=None, log_freq=2)
    train_result = trainer.train(epoch)
    test_result = trainer.test(epoch)
    return train_result, test_result, bert.embedding.token.weight.detach().clone()


def make_batches(n, batch_size, seq_len, vocab_size):
    out = []
    for _ in range(n):
        bert_input = torch.randint(1, vocab_size, (batch_size, seq_len))
        bert_input[:, -2:] = 0  # padding
        bert_label = torch.where(torch.rand(batch_size, seq_len) < 0.15, bert_input, torch.zeros_like(bert_input))
        segment_label = torch.cat([torch.ones(batch_size, seq_len // 2, dtype=torch.long),
                                   2 * torch.ones(batch_size, seq_len - seq_len // 2, dtype=torch.long)], 1)
        segment_label[:, -2:] = 0
        out.append({"bert_input": bert_input, "bert_label": bert_label, "segment_label": segment_label,
                    "is_next": torch.randint(0, 2, (batch_size,))})
    return out


def target():
    torch.manual_seed(0)
    vocab_size = 30
    initial_state = {k: v.clone() for k, v in BERT(vocab_size, hidden=16, n_layers=2, attn_heads=2).state_dict().items()}
    return [
        (pretrain, (initial_state, vocab_size, make_batches(4, 4, 12, vocab_size), make_batches(2, 4, 12, vocab_size), 0), {}),
        (pretrain, (initial_state, vocab_size, make_batches(3, 4, 12, vocab_size), make_batches(1, 4, 12, vocab_size), 1),
         {"lr": 3e-3, "seed": 1}),
    ]


EXPECT = ("extract: `iteration` is a training loop whose tensor part (the `BERTLM` forward and the two NLL "
          "losses) is followed by `backward`, the scheduled optimizer step (NumPy learning rates) and five "
          "`.item()` reads feeding a printed dict; the fix compiles the forward-and-loss part as a helper and "
          "keeps the step and logging eager")
