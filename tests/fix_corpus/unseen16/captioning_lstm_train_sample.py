"""Training steps and greedy caption sampling from yunjey/pytorch-tutorial (`tutorials/03-advanced/image_captioning/`:
`model.py` `EncoderCNN`, `DecoderRNN.forward`/`sample` (the stored, older revision), `train.py` `main`'s training loop,
`sample.py` `main`'s word lookup). `EncoderCNN.forward` re-wraps the backbone features with `Variable(features.data)`
before the linear layer and `BatchNorm1d`; `DecoderRNN.forward` concatenates the image feature in front of the word
embeddings and runs the LSTM on a `pack_padded_sequence`, classifying `hiddens[0]`; the training loop builds the
targets with `pack_padded_sequence(captions, lengths, batch_first=True)[0]`, zeroes both models' grads, steps Adam
over `decoder.parameters() + encoder.linear/bn.parameters()` and prints the loss and `np.exp(loss.item())` every
`log_step` steps (the checkpoint `torch.save` every `save_step` steps is kept, `save_step` larger than the loop);
`sample` is a 20-step greedy Python loop feeding `outputs.max(1)[1]` back through the embedding, and the words are
looked up from `sampled_ids[0].cpu().numpy()` until `'<end>'`.
Adaptations: the pretrained ResNet-152 (torchvision not installed, weights need a download) is a small conv stand-in
with the same `children()[:-1]` + `fc.in_features` use; the vocabulary (`Vocabulary` pickle) is a small stand-in with
`idx2word`/`word2idx`; the data loader is a list of `(images, captions, lengths)` batches made in the factory;
`args` is a namespace; `sample` collects with `torch.stack(sampled_ids, 1)` instead of the stored revision's
`torch.cat(sampled_ids, 1)`, which needed the old keep-dim `max` (the newer upstream file uses `torch.stack`);
the sampling runs in the same called function after training (encoder in `eval()` as in `sample.py`) on a batch of
two images (the stored `sample`'s `squeeze()` would drop the batch axis of one image before `[0]`). So that a
call repeats, the called function `train_and_caption` seeds torch and restores both models from copies taken in the
factory, and builds its optimizer itself; it returns the losses, the sampled ids and the sentence."""
import argparse
import copy
import os

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.nn.utils.rnn import pack_padded_sequence

device = torch.device('cpu')


# ---- stand-in for torchvision.models.resnet152(pretrained=True)
class _TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, 10)


class models:
    @staticmethod
    def resnet152(pretrained=True):
        return _TinyResNet()


# ---- model.py
class EncoderCNN(nn.Module):
    def __init__(self, embed_size):
        """Load the pretrained ResNet-152 and replace top fc layer."""
        super(EncoderCNN, self).__init__()
        resnet = models.resnet152(pretrained=True)
        modules = list(resnet.children())[:-1]      # delete the last fc layer.
        self.resnet = nn.Sequential(*modules)
        self.linear = nn.Linear(resnet.fc.in_features, embed_size)
        self.bn = nn.BatchNorm1d(embed_size, momentum=0.01)
        self.init_weights()

    def init_weights(self):
        """Initialize the weights."""
        self.linear.weight.data.normal_(0.0, 0.02)
        self.linear.bias.data.fill_(0)

    def forward(self, images):
        """Extract the image feature vectors."""
        features = self.resnet(images)
        features = Variable(features.data)  # BREAK
        features = features.view(features.size(0), -1)
        features = self.bn(self.linear(features))
        return features


class DecoderRNN(nn.Module):
    def __init__(self, embed_size, hidden_size, vocab_size, num_layers):
        """Set the hyper-parameters and build the layers."""
        super(DecoderRNN, self).__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)
        self.init_weights()

    def init_weights(self):
        """Initialize weights."""
        self.embed.weight.data.uniform_(-0.1, 0.1)
        self.linear.weight.data.uniform_(-0.1, 0.1)
        self.linear.bias.data.fill_(0)

    def forward(self, features, captions, lengths):
        """Decode image feature vectors and generates captions."""
        embeddings = self.embed(captions)
        embeddings = torch.cat((features.unsqueeze(1), embeddings), 1)
        packed = pack_padded_sequence(embeddings, lengths, batch_first=True)  # BREAK
        hiddens, _ = self.lstm(packed)  # BREAK
        outputs = self.linear(hiddens[0])
        return outputs

    def sample(self, features, states=None):
        """Samples captions for given image features (Greedy search)."""
        sampled_ids = []
        inputs = features.unsqueeze(1)
        for i in range(20):                                      # maximum sampling length
            hiddens, states = self.lstm(inputs, states)          # (batch_size, 1, hidden_size),  # BREAK
            outputs = self.linear(hiddens.squeeze(1))            # (batch_size, vocab_size)
            predicted = outputs.max(1)[1]
            sampled_ids.append(predicted)
            inputs = self.embed(predicted)
            inputs = inputs.unsqueeze(1)                         # (batch_size, 1, embed_size)
        sampled_ids = torch.stack(sampled_ids, 1)                # (batch_size, 20)  (adaptation: was torch.cat)
        return sampled_ids.squeeze()


# ---- stand-in for build_vocab.Vocabulary
class Vocabulary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = {}
        self.idx = 0

    def add_word(self, word):
        if word not in self.word2idx:
            self.word2idx[word] = self.idx
            self.idx2word[self.idx] = word
            self.idx += 1

    def __len__(self):
        return len(self.word2idx)


# ---- train.py main (training loop) + sample.py main (caption)
def train_and_caption(encoder, decoder, data_loader, image, vocab, args, states):
    torch.manual_seed(0)  # adaptation: so that a call repeats  # BREAK
    encoder.load_state_dict(states[0])  # BREAK
    decoder.load_state_dict(states[1])  # BREAK
    encoder.train()

    # Loss and optimizer
    criterion = nn.CrossEntropyLoss()
    params = list(decoder.parameters()) + list(encoder.linear.parameters()) + list(encoder.bn.parameters())  # BREAK
    optimizer = torch.optim.Adam(params, lr=args.learning_rate)

    losses = []
    # Train the models
    total_step = len(data_loader)
    for epoch in range(args.num_epochs):
        for i, (images, captions, lengths) in enumerate(data_loader):

            # Set mini-batch dataset
            images = images.to(device)
            captions = captions.to(device)
            targets = pack_padded_sequence(captions, lengths, batch_first=True)[0]

            # Forward, backward and optimize
            features = encoder(images)
            outputs = decoder(features, captions, lengths)
            loss = criterion(outputs, targets)
            decoder.zero_grad()
            encoder.zero_grad()
            loss.backward()
            optimizer.step()  # BREAK
            losses.append(loss.detach())

            # Print log info
            if i % args.log_step == 0:
                print('Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}, Perplexity: {:5.4f}'
                      .format(epoch, args.num_epochs, i, total_step, loss.item(), np.exp(loss.item())))

            # Save the model checkpoints
            if (i+1) % args.save_step == 0:
                torch.save(decoder.state_dict(), os.path.join(
                    args.model_path, 'decoder-{}-{}.ckpt'.format(epoch+1, i+1)))
                torch.save(encoder.state_dict(), os.path.join(
                    args.model_path, 'encoder-{}-{}.ckpt'.format(epoch+1, i+1)))

    # sample.py: generate a caption from the image
    encoder.eval()
    image_tensor = image.to(device)
    feature = encoder(image_tensor)
    sampled_ids = decoder.sample(feature)
    sampled_ids = sampled_ids[0].cpu().numpy()          # (1, max_seq_length) -> (max_seq_length)

    # Convert word_ids to words
    sampled_caption = []
    for word_id in sampled_ids:
        word = vocab.idx2word[word_id]
        sampled_caption.append(word)
        if word == '<end>':
            break
    sentence = ' '.join(sampled_caption)
    print(sentence)
    return torch.stack(losses), torch.as_tensor(sampled_ids), sentence


def target():
    torch.manual_seed(0)
    vocab = Vocabulary()
    for w in ['<pad>', '<start>', '<end>', '<unk>', 'a', 'man', 'dog', 'on', 'the', 'grass', 'with', 'ball',
              'red', 'sits', 'runs']:
        vocab.add_word(w)
    args = argparse.Namespace(embed_size=16, hidden_size=24, num_layers=1, learning_rate=0.01, num_epochs=1,
                              log_step=2, save_step=1000, model_path='models/')
    encoder = EncoderCNN(args.embed_size).to(device)
    decoder = DecoderRNN(args.embed_size, args.hidden_size, len(vocab), args.num_layers).to(device)
    states = (copy.deepcopy(encoder.state_dict()), copy.deepcopy(decoder.state_dict()))

    def loader(n, bs, max_len):
        out = []
        for _ in range(n):
            lengths = sorted(torch.randint(3, max_len + 1, (bs,)).tolist(), reverse=True)
            captions = torch.zeros(bs, max(lengths), dtype=torch.long)
            for b, L in enumerate(lengths):
                captions[b, 0] = 1
                captions[b, 1:L - 1] = torch.randint(4, len(vocab), (L - 2,))
                captions[b, L - 1] = 2
            out.append((torch.randn(bs, 3, 16, 16), captions, lengths))
        return out

    data1, data2 = loader(3, 4, 7), loader(2, 4, 9)
    image1, image2 = torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16)
    return [
        (train_and_caption, (encoder, decoder, data1, image1, vocab, args, states), {}),
        (train_and_caption, (encoder, decoder, data2, image2, vocab, args, states), {}),
    ]


EXPECT = ("extract: the training loop (packed-sequence LSTM, `loss.item()` logging with `np.exp`, optimizer steps) "
          "and the greedy sampler's `.cpu().numpy()` word lookup stay eager glue; the encoder/decoder forward and the "
          "20-step greedy loop are graph-friendly pieces to compile around them")
