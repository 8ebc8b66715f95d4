"""Kim-CNN sentence classification: training with periodic evaluation, then prediction, from
Shawn1993/cnn-text-classification-pytorch (an early revision: `train.py` `train`, `eval`, `predict`; `model.py`
`CNN_Text`). `train` builds Adam itself and, per torchtext batch, transposes the text in place and shifts the labels
(`feature.data.t_(), target.data.sub_(1)`, a tuple expression statement), steps, and every `log_interval` steps
computes `corrects` with `(torch.max(logit, 1)[1].view(target.size()).data == target.data).sum()` and writes a
`'\\rBatch[{}] - loss: {:.6f}  acc: {:.4f}%({}/{})'.format(...)` line with `sys.stdout.write`; every
`test_interval` steps it calls `eval` (which sums the loss and a tensor `corrects`, divides by
`len(data_iter.dataset)`, calls `model.train()` and prints), and every `save_interval` steps it saves a snapshot.
`CNN_Text.forward` embeds, tests `self.args.static`, and uses two list comprehensions over `self.convs1`
(`F.max_pool1d(i, i.size(2))`) before `torch.cat`. `predict` asserts a `str`, preprocesses it, looks tokens up in
`text_field.vocab.stoi`, builds `text_field.tensor_type(text)`, wraps it in `autograd.Variable(x, volatile=True)`,
prints it, and returns `label_feild.vocab.itos[...]`. Adaptations: torchtext's `Field`/`BucketIterator`/`Batch` are
minimal stand-ins (the iterator yields fresh `Batch(text, label, batch_size)` tensors each pass, as torchtext does,
so the in-place `t_()`/`sub_(1)` never touch the factory's tensors); in this torch `feature.data.t_()` transposes
only the `.data` alias, not `feature` (old `Variable.data` was the tensor itself), so the stand-in iterator yields
batch-first text and the line, kept, no longer changes `feature`'s shape (`target.data.sub_(1)` still shifts the
shared storage); `.cuda()` is dropped (`args.cuda` False);
old-torch `loss.data[0]` is `loss.item()` and `predicted.data[0][0]` is `predicted.data[0].item()`; the snapshot
`os.makedirs` + `torch.save(model, ...)` keep the path in a list; the called function `run` is `main.py`'s train then
predict sequence (written from the collector's knowledge of it; `main.py` was listed, not read). So that a call
repeats, `run` restores the model from the factory's copy and seeds torch (`reset_`); it returns the evaluation
results, the predicted labels and the final logits of a fixed batch."""
import collections
import copy
import os
import sys

import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.nn.functional as F


# ---- model.py
class CNN_Text(nn.Module):

    def __init__(self, args):
        super(CNN_Text,self).__init__()
        self.args = args

        V = args.embed_num
        D = args.embed_dim
        C = args.class_num
        Ci = 1
        Co = args.kernel_num
        Ks = args.kernel_sizes

        self.embed = nn.Embedding(V, D)
        self.convs1 = nn.ModuleList([nn.Conv2d(Ci, Co, (K, D)) for K in Ks])
        self.dropout = nn.Dropout(args.dropout)
        self.fc1 = nn.Linear(len(Ks)*Co, C)

    def conv_and_pool(self, x, conv):
        x = F.relu(conv(x)).squeeze(3) #(N,Co,W)
        x = F.max_pool1d(x, x.size(2)).squeeze(2)
        return x

    def forward(self, x):
        x = self.embed(x) # (N,W,D)

        if self.args.static:
            x = autograd.Variable(x)

        x = x.unsqueeze(1) # (N,Ci,W,D)
        x = [F.relu(conv(x)).squeeze(3) for conv in self.convs1] #[(N,Co,W), ...]*len(Ks)
        x = [F.max_pool1d(i, i.size(2)).squeeze(2) for i in x] #[(N,Co), ...]*len(Ks)
        x = torch.cat(x, 1)
        x = self.dropout(x) # (N,len(Ks)*Co)
        logit = self.fc1(x) # (N,C)
        return logit


# ---- stand-ins for torchtext
class Batch(object):
    def __init__(self, text, label):
        self.text, self.label = text, label
        self.batch_size = label.size(0)


class BucketIterator(object):
    """Yields fresh Batch objects (labels 1-based) on each pass, as torchtext does; text is batch-first here."""
    def __init__(self, texts, labels):
        self.texts, self.labels = texts, labels
        self.dataset = range(sum(l.size(0) for l in labels))

    def __iter__(self):
        for text, label in zip(self.texts, self.labels):
            yield Batch(text.clone(), label.clone())


class Vocab(object):
    def __init__(self, itos):
        self.itos = itos
        self.stoi = collections.defaultdict(int, {s: i for i, s in enumerate(itos)})  # unknown -> '<unk>'


class Field(object):
    def __init__(self, itos, tensor_type=torch.LongTensor):
        self.vocab = Vocab(itos)
        self.tensor_type = tensor_type

    def preprocess(self, text):
        return text.lower().split()


saved = []


# ---- train.py
def train(train_iter, dev_iter, model, args):
    if args.cuda:
        model.cuda()

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)  # BREAK

    steps = 0
    model.train()
    for epoch in range(1, args.epochs+1):
        for batch in train_iter:
            feature, target = batch.text, batch.label
            feature.data.t_(), target.data.sub_(1)  # batch first, index align
            if args.cuda:
                feature, target = feature.cuda(), target.cuda()

            optimizer.zero_grad()
            logit = model(feature)

            #print('logit vector', logit.size())
            #print('target vector', target.size())
            loss = F.cross_entropy(logit, target)
            loss.backward()
            optimizer.step()  # BREAK

            steps += 1
            if steps % args.log_interval == 0:
                corrects = (torch.max(logit, 1)[1].view(target.size()).data == target.data).sum()
                accuracy = 100.0 * corrects/batch.batch_size
                sys.stdout.write(
                    '\rBatch[{}] - loss: {:.6f}  acc: {:.4f}%({}/{})'.format(steps,
                                                                             loss.item(),
                                                                             accuracy,
                                                                             corrects,
                                                                             batch.batch_size))
            if steps % args.test_interval == 0:
                eval(dev_iter, model, args)
            if steps % args.save_interval == 0:
                save_prefix = os.path.join(args.save_dir, 'snapshot')
                save_path = '{}_steps{}.pt'.format(save_prefix, steps)
                saved.append(save_path)  # torch.save(model, save_path)


def eval(data_iter, model, args):
    model.eval()
    corrects, avg_loss = 0, 0
    for batch in data_iter:
        feature, target = batch.text, batch.label
        feature.data.t_(), target.data.sub_(1)  # batch first, index align
        if args.cuda:
            feature, target = feature.cuda(), target.cuda()

        logit = model(feature)
        loss = F.cross_entropy(logit, target, size_average=False)

        avg_loss += loss.item()  # BREAK
        corrects += (torch.max(logit, 1)
                     [1].view(target.size()).data == target.data).sum()

    size = len(data_iter.dataset)
    avg_loss = avg_loss/size
    accuracy = 100.0 * corrects/size
    model.train()
    print('\nEvaluation - loss: {:.6f}  acc: {:.4f}%({}/{}) \n'.format(avg_loss,
                                                                       accuracy,
                                                                       corrects,
                                                                       size))
    return avg_loss, accuracy


def predict(text, model, text_field, label_feild):
    assert isinstance(text, str)
    model.eval()
    # text = text_field.tokenize(text)
    text = text_field.preprocess(text)
    text = [[text_field.vocab.stoi[x] for x in text]]
    x = text_field.tensor_type(text)
    x = autograd.Variable(x, volatile=True)  # BREAK
    print(x)  # BREAK
    output = model(x)
    _, predicted = torch.max(output, 1)
    return label_feild.vocab.itos[predicted.data[0].item()+1]  # BREAK


# ---- main.py's train-then-predict sequence (from the collector's knowledge)
def run(cnn, train_iter, dev_iter, text_field, label_field, args, sentences, initial_state):
    reset_(cnn, initial_state)
    train(train_iter, dev_iter, cnn, args)
    results = eval(dev_iter, cnn, args)
    labels = []
    for sentence in sentences:
        label = predict(sentence, cnn, text_field, label_field)
        print('\n[Text]  {}\n[Label] {}\n'.format(sentence, label))
        labels.append(label)
    return results, labels, cnn(torch.arange(12).view(2, 6) % args.embed_num)


def reset_(cnn, initial_state):
    """Adaptation: restore the model from the factory's copy and seed torch (dropout), so that a call repeats."""
    cnn.load_state_dict(initial_state)  # BREAK
    torch.manual_seed(0)  # BREAK
    del saved[:]


class Args(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def target():
    torch.manual_seed(0)
    words = ['<unk>', '<pad>', 'a', 'good', 'bad', 'movie', 'film', 'great', 'awful', 'plot', 'the', 'fun']
    text_field = Field(words)
    label_field = Field(['<unk>', 'positive', 'negative'])
    args = Args(embed_num=len(words), embed_dim=8, class_num=2, kernel_num=4, kernel_sizes=[2, 3], dropout=0.5,
                static=False, cuda=False, lr=0.01, epochs=2, log_interval=1, test_interval=2, save_interval=3,
                save_dir='snapshot')
    cnn = CNN_Text(args)
    initial_state = copy.deepcopy(cnn.state_dict())

    def iterator(n, bs, W):
        return BucketIterator([torch.randint(2, len(words), (bs, W)) for _ in range(n)],
                              [torch.randint(1, 3, (bs,)) for _ in range(n)])

    train_iter, dev_iter = iterator(3, 4, 6), iterator(1, 4, 6)
    args2 = Args(**dict(args.__dict__, lr=0.001, epochs=1, log_interval=2))
    sentences1 = ['a good movie', 'the plot was awful fun']
    sentences2 = ['great fun film', 'bad bad plot', 'the movie was']
    return [
        (run, (cnn, train_iter, dev_iter, text_field, label_field, args, sentences1, initial_state), {}),
        (run, (cnn, train_iter, dev_iter, text_field, label_field, args2, sentences2, initial_state), {}),
    ]


EXPECT = ("extract: the driver's host parts (`sys.stdout.write` of a formatted tensor accuracy, `loss.item()`, "
          "the in-place `t_()`/`sub_(1)` on batch inputs, `predict`'s vocabulary lookups, `print(x)` and `itos[...]` "
          "indexing with `.item()`) must stay eager while `CNN_Text.forward` traces; breaks expected at "
          "`optimizer.step()`, the `sys.stdout.write(...)` line, `eval`'s `loss.item()` and `print(...)`, "
          "`predict`'s `text_field.tensor_type(text)`/`print(x)`/`.item()` return, and `reset_`'s `load_state_dict`")
