"""One training epoch and one validation epoch of the Show, Attend and Tell captioner of
sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning (`models.py`: `Encoder` with `fine_tune`, `Attention`,
`DecoderWithAttention`; `train.py`: `train`, `validate`; `utils.py`: `clip_gradient`, `AverageMeter`, `accuracy`).
`DecoderWithAttention.forward` sorts the batch by `caption_lengths.squeeze(1).sort(descending=True)`, takes
`decode_lengths = (caption_lengths - 1).tolist()`, allocates `torch.zeros(batch_size, max(decode_lengths), ...)`
and loops `for t in range(max(decode_lengths))` with `batch_size_t = sum([l > t for l in decode_lengths])` slicing
the shrinking batch, writing `predictions[:batch_size_t, t, :] = preds` in place. `train` packs scores/targets with
`pack_padded_sequence(scores, decode_lengths, batch_first=True)`, adds the doubly-stochastic attention penalty,
clips with `clip_gradient` (a loop over `param_groups` with `param.grad.data.clamp_`), steps both optimizers
behind `is not None` tests, updates `AverageMeter`s with `loss.item()` and `accuracy(...)` (`correct_total.item()`)
weighted by `sum(decode_lengths)`, reads `time.time()`, and prints with `str.format` every `print_freq` batches.
`validate` additionally builds BLEU references with `allcaps[j].tolist()` and a `map(lambda c: [w for w in c if w
not in {...}])` comprehension, and hypotheses from `preds.tolist()` trimmed by `decode_lengths[j]`, then asserts
`len(references) == len(hypotheses)`.
Adaptations: the ResNet-101 (torchvision does not import, no weights) is a small stand-in `nn.Sequential` of two
convs whose `children()` keep the `fine_tune` slicing meaningful; sizes are small (encoder_dim 16, 4x4 encoded
image, vocab 11, emb/attention/decoder 12); the stored `models.py` revision's `decoder_layers` argument (passed as
`LSTMCell`'s `bias`) is kept; the `CaptionDataset` loaders are lists of `(imgs, caps, caplens[, allcaps])`
batches made in the factory; `word_map` is a small dict; nltk's `corpus_bleu` is a stand-in computing unigram
precision over the same `references`/`hypotheses` lists; `print_freq` is 1; the stored revision's `scores, _ = pack_padded_sequence(...)` unpacking (a 2-field
PackedSequence of old torch) is `pack_padded_sequence(...).data`, as in the repository's later revision. So that a call repeats exactly, the
called function `train_and_validate` restores encoder, decoder and both optimizers from copies taken in the
factory and seeds torch (`reset_`); it returns the BLEU stand-in, the meters' averages and a decoder weight."""
import copy
import time

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

device = torch.device("cpu")

# Model / training parameters (train.py globals, shrunk)
emb_dim = 12
attention_dim = 12
decoder_dim = 12
decoder_layers = 1
dropout = 0.5
encoder_lr = 1e-4
decoder_lr = 4e-4
grad_clip = 5.
alpha_c = 1.
print_freq = 1
fine_tune_encoder = True
word_map = {'<pad>': 0, '<start>': 8, '<end>': 9, '<unk>': 10}
word_map.update({'w%d' % i: i for i in range(1, 8)})


class Encoder(nn.Module):
    """
    Encoder.
    """

    def __init__(self, encoded_image_size=4):
        super(Encoder, self).__init__()
        self.enc_image_size = encoded_image_size

        # stand-in for torchvision.models.resnet101(pretrained=True) minus linear and pool layers
        modules = [nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                   nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1)]
        self.resnet = nn.Sequential(*modules)

        # Resize image to fixed size to allow input images of variable size
        self.adaptive_pool = nn.AdaptiveAvgPool2d((encoded_image_size, encoded_image_size))

        self.fine_tune()

    def forward(self, images):
        out = self.resnet(images)  # (batch_size, 2048, image_size/32, image_size/32)
        out = self.adaptive_pool(out)  # (batch_size, 2048, encoded_image_size, encoded_image_size)
        out = out.permute(0, 2, 3, 1)  # (batch_size, encoded_image_size, encoded_image_size, 2048)
        return out

    def fine_tune(self, fine_tune=True):
        for p in self.resnet.parameters():
            p.requires_grad = False
        # If fine-tuning, only fine-tune convolutional blocks 2 through 4
        for c in list(self.resnet.children())[5:]:
            for p in c.parameters():
                p.requires_grad = fine_tune


class Attention(nn.Module):
    """
    Attention Network.
    """

    def __init__(self, encoder_dim, decoder_dim, attention_dim):
        super(Attention, self).__init__()
        self.encoder_att = nn.Linear(encoder_dim, attention_dim)  # linear layer to transform encoded image
        self.decoder_att = nn.Linear(decoder_dim, attention_dim)  # linear layer to transform decoder's output
        self.full_att = nn.Linear(attention_dim, 1)  # linear layer to calculate values to be softmax-ed
        self.relu = nn.ReLU()
        self.softmax = nn.Softmax(dim=1)  # softmax layer to calculate weights

    def forward(self, encoder_out, decoder_hidden):
        att1 = self.encoder_att(encoder_out)  # (batch_size, num_pixels, attention_dim)
        att2 = self.decoder_att(decoder_hidden)  # (batch_size, attention_dim)
        att = self.full_att(self.relu(att1 + att2.unsqueeze(1))).squeeze(2)  # (batch_size, num_pixels)
        alpha = self.softmax(att)  # (batch_size, num_pixels)
        attention_weighted_encoding = (encoder_out * alpha.unsqueeze(2)).sum(dim=1)  # (batch_size, encoder_dim)

        return attention_weighted_encoding, alpha


class DecoderWithAttention(nn.Module):
    """
    Decoder.
    """

    def __init__(self, attention_dim, embed_dim, decoder_dim, vocab_size, decoder_layers=1, encoder_dim=16,
                 dropout=0.5):
        super(DecoderWithAttention, self).__init__()

        self.encoder_dim = encoder_dim
        self.attention_dim = attention_dim
        self.embed_dim = embed_dim
        self.decoder_dim = decoder_dim
        self.vocab_size = vocab_size
        self.decoder_layers = decoder_layers
        self.dropout = dropout

        self.attention = Attention(encoder_dim, decoder_dim, attention_dim)  # attention network

        self.embedding = nn.Embedding(vocab_size, embed_dim)  # embedding layer
        self.dropout = nn.Dropout(p=self.dropout)
        self.decode_step = nn.LSTMCell(embed_dim + encoder_dim, decoder_dim, decoder_layers)  # decoding LSTMCell
        self.init_h = nn.Linear(encoder_dim, decoder_dim)  # linear layer to find initial hidden state of LSTMCell
        self.init_c = nn.Linear(encoder_dim, decoder_dim)  # linear layer to find initial cell state of LSTMCell
        self.f_beta = nn.Linear(decoder_dim, encoder_dim)  # linear layer to create a sigmoid-activated gate
        self.sigmoid = nn.Sigmoid()
        self.fc = nn.Linear(decoder_dim, vocab_size)  # linear layer to find scores over vocabulary
        self.init_weights()  # initialize some layers with the uniform distribution

    def init_weights(self):
        self.embedding.weight.data.uniform_(-0.1, 0.1)
        self.fc.bias.data.fill_(0)
        self.fc.weight.data.uniform_(-0.1, 0.1)

    def init_hidden_state(self, encoder_out):
        mean_encoder_out = encoder_out.mean(dim=1)
        h = self.init_h(mean_encoder_out)  # (batch_size, decoder_dim)
        c = self.init_c(mean_encoder_out)
        return h, c

    def forward(self, encoder_out, encoded_captions, caption_lengths):
        batch_size = encoder_out.size(0)
        encoder_dim = encoder_out.size(-1)
        vocab_size = self.vocab_size

        # Flatten image
        encoder_out = encoder_out.view(batch_size, -1, encoder_dim)  # (batch_size, num_pixels, encoder_dim)
        num_pixels = encoder_out.size(1)

        # Sort input data by decreasing lengths; why? apparent below
        caption_lengths, sort_ind = caption_lengths.squeeze(1).sort(dim=0, descending=True)
        encoder_out = encoder_out[sort_ind]
        encoded_captions = encoded_captions[sort_ind]

        # Embedding
        embeddings = self.embedding(encoded_captions)  # (batch_size, max_caption_length, embed_dim)

        # Initialize LSTM state
        h, c = self.init_hidden_state(encoder_out)  # (batch_size, decoder_dim)

        # We won't decode at the <end> position, since we've finished generating as soon as we generate <end>
        # So, decoding lengths are actual lengths - 1
        decode_lengths = (caption_lengths - 1).tolist()  # BREAK

        # Create tensors to hold word predicion scores and alphas
        predictions = torch.zeros(batch_size, max(decode_lengths), vocab_size).to(device)
        alphas = torch.zeros(batch_size, max(decode_lengths), num_pixels).to(device)

        for t in range(max(decode_lengths)):
            batch_size_t = sum([l > t for l in decode_lengths])
            attention_weighted_encoding, alpha = self.attention(encoder_out[:batch_size_t],
                                                                h[:batch_size_t])
            gate = self.sigmoid(self.f_beta(h[:batch_size_t]))  # gating scalar, (batch_size_t, encoder_dim)
            attention_weighted_encoding = gate * attention_weighted_encoding
            h, c = self.decode_step(
                torch.cat([embeddings[:batch_size_t, t, :], attention_weighted_encoding], dim=1),
                (h[:batch_size_t], c[:batch_size_t]))  # (batch_size_t, decoder_dim)
            preds = self.fc(self.dropout(h))  # (batch_size_t, vocab_size)
            predictions[:batch_size_t, t, :] = preds
            alphas[:batch_size_t, t, :] = alpha

        return predictions, encoded_captions, decode_lengths, alphas, sort_ind


def clip_gradient(optimizer, grad_clip):
    for group in optimizer.param_groups:
        for param in group['params']:
            if param.grad is not None:
                param.grad.data.clamp_(-grad_clip, grad_clip)


class AverageMeter(object):
    """
    Keeps track of most recent, average, sum, and count of a metric.
    """

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(scores, targets, k):
    batch_size = targets.size(0)
    _, ind = scores.topk(k, 1, True, True)
    correct = ind.eq(targets.view(-1, 1).expand_as(ind))
    correct_total = correct.view(-1).float().sum()  # 0D tensor
    return correct_total.item() * (100.0 / batch_size)  # BREAK


def corpus_bleu(references, hypotheses, emulate_multibleu=True):
    """Stand-in for nltk's corpus_bleu (not installed): corpus unigram precision."""
    hit = tot = 0
    for refs, hyp in zip(references, hypotheses):
        ref_words = set(w for r in refs for w in r)
        hit += sum(1 for w in hyp if w in ref_words)
        tot += len(hyp)
    return hit / max(tot, 1)


def train(train_loader, encoder, decoder, criterion, encoder_optimizer, decoder_optimizer, epoch):
    decoder.train()  # train mode (dropout and batchnorm is used)
    encoder.train()

    batch_time = AverageMeter()  # forward prop. + back prop. time
    data_time = AverageMeter()  # data loading time
    losses = AverageMeter()  # loss (per word decoded)
    top5accs = AverageMeter()  # top5 accuracy

    start = time.time()  # BREAK

    # Batches
    for i, (imgs, caps, caplens) in enumerate(train_loader):
        data_time.update(time.time() - start)  # BREAK

        # Move to GPU, if available
        imgs = imgs.to(device)
        caps = caps.to(device)
        caplens = caplens.to(device)

        # Forward prop.
        imgs = encoder(imgs)
        scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)

        # Since we decoded starting with <start>, the targets are all words after <start>, up to <end>
        targets = caps_sorted[:, 1:]

        # Remove timesteps that we didn't decode at, or are pads
        # pack_padded_sequence is an easy trick to do this
        scores = pack_padded_sequence(scores, decode_lengths, batch_first=True).data
        targets = pack_padded_sequence(targets, decode_lengths, batch_first=True).data

        # Calculate loss
        loss = criterion(scores, targets)

        # Add doubly stochastic attention regularization
        loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()

        # Back prop.
        decoder_optimizer.zero_grad()
        if encoder_optimizer is not None:
            encoder_optimizer.zero_grad()
        loss.backward()

        # Clip gradients
        if grad_clip is not None:
            clip_gradient(decoder_optimizer, grad_clip)
            if encoder_optimizer is not None:
                clip_gradient(encoder_optimizer, grad_clip)

        # Update weights
        decoder_optimizer.step()  # BREAK
        if encoder_optimizer is not None:
            encoder_optimizer.step()  # BREAK

        # Keep track of metrics
        top5 = accuracy(scores, targets, 5)
        losses.update(loss.item(), sum(decode_lengths))
        top5accs.update(top5, sum(decode_lengths))
        batch_time.update(time.time() - start)

        start = time.time()

        # Print status
        if i % print_freq == 0:
            print('Epoch: [{0}][{1}/{2}]\t'
                  'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
                  'Top-5 Accuracy {top5.val:.3f} ({top5.avg:.3f})'.format(epoch, i, len(train_loader),
                                                                          loss=losses, top5=top5accs))
    return losses.avg, top5accs.avg


def validate(val_loader, encoder, decoder, criterion):
    decoder.eval()  # eval mode (no dropout or batchnorm)
    if encoder is not None:
        encoder.eval()

    batch_time = AverageMeter()
    losses = AverageMeter()
    top5accs = AverageMeter()

    start = time.time()  # BREAK

    references = list()  # references (true captions) for calculating BLEU-4 score
    hypotheses = list()  # hypotheses (predictions)

    # Batches
    for i, (imgs, caps, caplens, allcaps) in enumerate(val_loader):

        # Move to device, if available
        imgs = imgs.to(device)
        caps = caps.to(device)
        caplens = caplens.to(device)

        # Forward prop.
        if encoder is not None:
            imgs = encoder(imgs)
        scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)

        # Since we decoded starting with <start>, the targets are all words after <start>, up to <end>
        targets = caps_sorted[:, 1:]

        # Remove timesteps that we didn't decode at, or are pads
        # pack_padded_sequence is an easy trick to do this
        scores_copy = scores.clone()
        scores = pack_padded_sequence(scores, decode_lengths, batch_first=True).data
        targets = pack_padded_sequence(targets, decode_lengths, batch_first=True).data

        # Calculate loss
        loss = criterion(scores, targets)

        # Add doubly stochastic attention regularization
        loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()

        # Keep track of metrics
        losses.update(loss.item(), sum(decode_lengths))
        top5 = accuracy(scores, targets, 5)
        top5accs.update(top5, sum(decode_lengths))
        batch_time.update(time.time() - start)

        start = time.time()

        if i % print_freq == 0:
            print('Validation: [{0}/{1}]\t'
                  'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
                  'Top-5 Accuracy {top5.val:.3f} ({top5.avg:.3f})\t'.format(i, len(val_loader),
                                                                            loss=losses, top5=top5accs))

        # References
        allcaps = allcaps[sort_ind]  # because images were sorted in the decoder
        for j in range(allcaps.shape[0]):
            img_caps = allcaps[j].tolist()
            img_captions = list(
                map(lambda c: [w for w in c if w not in {word_map['<start>'], word_map['<pad>']}],
                    img_caps))  # remove <start> and pads
            references.append(img_captions)

        # Hypotheses
        _, preds = torch.max(scores_copy, dim=2)
        preds = preds.tolist()
        temp_preds = list()
        for j, p in enumerate(preds):
            temp_preds.append(preds[j][:decode_lengths[j]])  # remove pads
        preds = temp_preds
        hypotheses.extend(preds)

        assert len(references) == len(hypotheses)

    # Calculate BLEU-4 scores
    bleu4 = corpus_bleu(references, hypotheses, emulate_multibleu=True)

    print(
        '\n * LOSS - {loss.avg:.3f}, TOP-5 ACCURACY - {top5.avg:.3f}, BLEU-4 - {bleu}\n'.format(
            loss=losses,
            top5=top5accs,
            bleu=bleu4))

    return bleu4


def reset_(encoder, decoder, encoder_optimizer, decoder_optimizer, states):
    """Adaptation: restore models/optimizers from the factory's copies and seed torch (dropout)."""
    encoder.load_state_dict(states[0])  # BREAK
    decoder.load_state_dict(states[1])  # BREAK
    encoder_optimizer.load_state_dict(states[2])  # BREAK
    decoder_optimizer.load_state_dict(states[3])  # BREAK
    torch.manual_seed(7)  # BREAK


def train_and_validate(encoder, decoder, criterion, encoder_optimizer, decoder_optimizer, train_loader,
                       val_loader, states, epoch=0):
    reset_(encoder, decoder, encoder_optimizer, decoder_optimizer, states)
    loss_avg, top5_avg = train(train_loader=train_loader, encoder=encoder, decoder=decoder, criterion=criterion,
                               encoder_optimizer=encoder_optimizer, decoder_optimizer=decoder_optimizer,
                               epoch=epoch)
    recent_bleu4 = validate(val_loader=val_loader, encoder=encoder, decoder=decoder, criterion=criterion)
    return torch.tensor([recent_bleu4, loss_avg, top5_avg]), decoder.fc.weight.detach().clone()


def target():
    torch.manual_seed(0)
    vocab_size = len(word_map)
    decoder = DecoderWithAttention(attention_dim=attention_dim, embed_dim=emb_dim, decoder_dim=decoder_dim,
                                   vocab_size=vocab_size, decoder_layers=decoder_layers, dropout=dropout)
    decoder_optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, decoder.parameters()),
                                         lr=decoder_lr)
    encoder = Encoder()
    encoder.fine_tune(fine_tune_encoder)
    encoder_optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, encoder.parameters()),
                                         lr=encoder_lr) if fine_tune_encoder else None
    criterion = nn.CrossEntropyLoss().to(device)
    states = tuple(copy.deepcopy(x.state_dict()) for x in (encoder, decoder, encoder_optimizer, decoder_optimizer))

    def make_batch(bs, max_len, with_all):
        caplens = torch.randint(3, max_len + 1, (bs, 1))
        caps = torch.zeros(bs, max_len, dtype=torch.long)
        for b in range(bs):
            n = int(caplens[b, 0])
            caps[b, 0] = word_map['<start>']
            caps[b, 1:n - 1] = torch.randint(1, 8, (n - 2,))
            caps[b, n - 1] = word_map['<end>']
        imgs = torch.randn(bs, 3, 8, 8)
        if with_all:
            allcaps = torch.stack([caps, caps.roll(1, 1)], dim=1)
            return imgs, caps, caplens, allcaps
        return imgs, caps, caplens

    train1 = [make_batch(4, 6, False) for _ in range(2)]
    val1 = [make_batch(4, 6, True)]
    train2 = [make_batch(3, 7, False) for _ in range(2)]
    val2 = [make_batch(3, 7, True)]
    args = (encoder, decoder, criterion, encoder_optimizer, decoder_optimizer)
    return [
        (train_and_validate, args + (train1, val1, states), {}),
        (train_and_validate, args + (train2, val2, states), {"epoch": 1}),
    ]


EXPECT = ("none: the decoder's loop length and per-step batch slice come from `(caption_lengths - 1).tolist()` "
          "(`max(decode_lengths)`, `sum([l > t for l in decode_lengths])`) and `pack_padded_sequence` takes the "
          "Python list: the shapes are data-dependent, so no source rewrite keeps one graph and the host-side "
          "meters/BLEU lists (`.item()`, `.tolist()`, `time.time()`) belong to an eager driver; the best a fix "
          "can do is move the logging out, leaving the `tolist` sites")
