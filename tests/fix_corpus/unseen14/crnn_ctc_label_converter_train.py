"""CRNN text-recognition training with CTC and string decoding, from meijieru/crnn.pytorch (the stored revision is
a fork's: `train.py` `train`, `val`; `utils.py` `strLabelConverter`). `train` builds the net itself
(`crnn.CRNN(...)`, `net.apply(weights_init)` with a nested `weights_init` testing `classname.find('Conv')`), an
Adam optimiser and `StepLR`, and each epoch calls `scheduler.step()` first; per batch it encodes the Python label
strings with `converter.encode` (a recursive `str`/`Iterable` dispatch building `[self.dict[char] ...]` lists),
makes `torch.Tensor(text).int()` / `torch.Tensor([preds.size(0)] * batch_size).int()` tensors, calls
`preds.requires_grad_(True)`, the CTC loss, steps, then decodes arg-max paths with `converter.decode` (batch mode
loops over `length.numel()` with tensor slices `t[index:index + l]` and recursive single-string calls whose Python
loop compares tensor elements `t[i] != 0 and (not (i > 0 and t[i - 1] == t[i]))`), counts exact string matches,
writes three scalars (`loss.item()`, `n_correct / batch_size`, `scheduler.get_lr()[0]`) at a float `cur_step`, and
prints a `%` line with `time.time()` every `displayInterval` batches; `val` does the same without the step, shows a
`pandas.DataFrame` of raw/decoded/ground-truth strings (`opt.n_test_disp` from the module's `opt`) and returns the
accuracy and mean loss. Adaptations: `warpctc_pytorch.CTCLoss` (not installed) is a stand-in with its call order
`(acts, labels, act_lens, label_lens)` and summed loss, over `nn.CTCLoss` of `log_softmax`ed activations; `crnn.CRNN`
(`models/crnn.py`, not read) is a small conv + bidirectional LSTM stand-in returning `(T, b, nclass)` (it adds the
CTC blank to `nclass`); `pandas` (not installed) is a `DataFrame` stand-in; tensorboardX's `SummaryWriter` a
recorder; the lmdb datasets/loaders are lists of `(images, label strings)` with a `.dataset` of the right length,
made in the factory; `collections.Iterable` (gone from Python 3.10) is `collections.abc.Iterable`; the output
directory `mkdir` and the `torch.save` checkpoints are dropped (kept in a list). So that a call repeats, the called
function `train` seeds torch before it builds the net (which it builds itself, as the original does); `opt` is a
module attribute set by `train` from its argument (the original parses it in `__main__`). It returns the last
validation accuracy and loss and the recorded scalars."""
import collections.abc
import time

import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable


# ---- utils.py
class strLabelConverter(object):
    def __init__(self, alphabet):
        self.alphabet = alphabet

        self.dict = {}
        for i, char in enumerate(alphabet):
            # NOTE: 0 is reserved for 'blank' required by wrap_ctc
            self.dict[char] = i + 1

    def encode(self, text):
        """Support batch or single str.

        Args:
            text (str or list of str): texts to convert.

        Returns:
            torch.IntTensor [length_0 + length_1 + ... length_{n - 1}]: encoded texts.
            torch.IntTensor [n]: length of each text.
        """
        if isinstance(text, str):
            text = [self.dict[char] for char in text]
            length = [len(text)]
        elif isinstance(text, collections.abc.Iterable):
            length = [len(s) for s in text]
            text = ''.join(text)
            text, _ = self.encode(text)
        return (text,length)

    def decode(self, t, length, raw=False):
        """Decode encoded texts back into strs.

        Args:
            torch.IntTensor [length_0 + length_1 + ... length_{n - 1}]: encoded texts.
            torch.IntTensor [n]: length of each text.

        Raises:
            AssertionError: when the texts and its length does not match.

        Returns:
            text (str or list of str): texts to convert.
        """
        if length.numel() == 1:
            length = length[0]
            assert t.numel() == length, "text with length: {} does not match declared length: {}".format(t.numel(),  # BREAK
                                                                                                         length)
            if raw:
                return ''.join([self.alphabet[i - 1] for i in t])  # BREAK
            else:
                char_list = []
                for i in range(length):  # BREAK
                    if t[i] != 0 and (not (i > 0 and t[i - 1] == t[i])):  # BREAK
                        char_list.append(self.alphabet[t[i] - 1])
                return ''.join(char_list)
        else:
            # batch mode
            assert t.numel() == length.sum(), "texts with length: {} does not match declared length: {}".format(  # BREAK
                t.numel(), length.sum())
            texts = []
            index = 0
            for i in range(length.numel()):
                l = length[i]
                texts.append(self.decode(t[index:index + l], torch.Tensor([l]).int(), raw=raw))  # BREAK
                index += l
            return texts


# ---- stand-ins
class CTCLoss(nn.Module):
    """Stand-in for warpctc_pytorch.CTCLoss: same call order (acts, labels, act_lens, label_lens), summed loss."""
    def __init__(self):
        super(CTCLoss, self).__init__()
        self.ctc = nn.CTCLoss(blank=0, reduction='sum', zero_infinity=True)

    def forward(self, acts, labels, act_lens, label_lens):
        return self.ctc(acts.log_softmax(2), labels, act_lens, label_lens)


class CRNN(nn.Module):
    """Stand-in for models.crnn.CRNN (not read): conv features, a bidirectional LSTM, (T, b, nclass) output."""
    def __init__(self, imgH, nc, nclass, nh):
        super(CRNN, self).__init__()  # BREAK
        self.cnn = nn.Sequential(nn.Conv2d(nc, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(True), nn.MaxPool2d(2, 2),  # BREAK
                                 nn.Conv2d(8, 8, 3, 1, 1), nn.ReLU(True), nn.AdaptiveAvgPool2d((1, None)))
        self.rnn = nn.LSTM(8, nh, bidirectional=True)
        self.embedding = nn.Linear(nh * 2, nclass + 1)

    def forward(self, input):
        conv = self.cnn(input)
        conv = conv.squeeze(2).permute(2, 0, 1)  # [w, b, c]
        recurrent, _ = self.rnn(conv)  # BREAK
        T, b, h = recurrent.size()
        output = self.embedding(recurrent.view(T * b, h)).view(T, b, -1)
        return output


class DataFrame(object):
    """Stand-in for pandas.DataFrame (not installed): prints rows."""
    def __init__(self, data, columns):
        self.data, self.columns = data, columns

    def __str__(self):
        return '\n'.join(['\t'.join(self.columns)] + ['\t'.join(row) for row in self.data])


class pandas(object):
    DataFrame = DataFrame


class SummaryWriter(object):
    """Stand-in for tensorboardX.SummaryWriter: records calls."""
    def __init__(self, log_dir=''):
        self.records = []

    def add_scalar(self, tag, scalar_value, global_step):
        self.records.append((tag, round(float(scalar_value), 5), global_step))

    def close(self):
        pass


class Loader(list):
    """Stand-in for a DataLoader over an lmdbDataset: a list of (images, labels) with a `.dataset`."""
    def __init__(self, batches):
        super(Loader, self).__init__(batches)
        self.dataset = range(sum(len(b[1]) for b in batches))


saved = []
opt = None


# ---- train.py
def val(net, test_loader, criterion, converter, device):
    net.eval()  # BREAK
    n_correct = 0
    val_loss = 0.0

    for i, (images, labels) in enumerate(test_loader):
        batch_size = images.size(0)
        text, length = converter.encode(labels)
        text = torch.Tensor(text).int()
        length = torch.Tensor(length).int()
        images = images.to(device)

        preds = net(images)
        preds_size = torch.Tensor([preds.size(0)] * batch_size).int()
        loss = criterion(preds, text, preds_size, length)
        val_loss += loss.item()

        _, preds = preds.max(2)
        preds = preds.squeeze(1)
        preds = preds.transpose(1, 0).contiguous().view(-1)
        sim_preds = converter.decode(preds.cpu().data, preds_size.cpu().data, raw=False)
        for pred, target in zip(sim_preds, labels):
            if pred == target:
                n_correct += 1

    raw_preds = converter.decode(preds.detach().data, preds_size.detach().data, raw=True)[:opt.n_test_disp]
    pandas_show = [[raw_pred, pred, gt] for raw_pred, pred, gt in zip(raw_preds, sim_preds, labels)]
    print(pandas.DataFrame(data=pandas_show, columns=['network_output', 'ctc_output', 'ground_truth']))

    accuracy = n_correct / float(test_loader.dataset.__len__())
    print('Test loss: %f, accuray: %f' % (val_loss / test_loader.dataset.__len__(), accuracy))
    return accuracy,val_loss / test_loader.dataset.__len__()


def train(run_opt, train_loader, test_loader):
    global opt
    opt = run_opt
    torch.manual_seed(opt.seed)  # adaptation: seed before the net is built, so that a call repeats  # BREAK
    del saved[:]
    if opt.output_dir is None:
        opt.output_dir = 'output'
    nc = 1
    device = torch.device("cpu")
    train_dataset = train_loader.dataset
    converter = strLabelConverter(opt.alphabet)
    criterion = CTCLoss()

    # custom weights initialization called on crnn
    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find('Conv') != -1:
            m.weight.data.normal_(0.0, 0.02)
        elif classname.find('BatchNorm') != -1:
            m.weight.data.normal_(1.0, 0.02)
            m.bias.data.fill_(0)

    net = CRNN(opt.imgH, nc, len(opt.alphabet), opt.nh).to(device)  # BREAK
    net.apply(weights_init)  # BREAK

    net = net.to(device)  # BREAK
    writer = SummaryWriter('./log/%s' % (time.strftime("%Y_%m_%d_%H_%M_%S", time.localtime())))  # BREAK

    criterion = criterion.to(device)

    # setup optimizer
    optimizer = optim.Adam(net.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))  # BREAK
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10, gamma=0.1)
    for epoch in range(opt.epochs):
        net.train()
        # Adjust lr
        scheduler.step()
        start = time.time()
        cur_step = 0
        for i, (images, labels) in enumerate(train_loader):
            n_correct = 0
            batch_size = images.size(0)
            text, length = converter.encode(labels)

            text = torch.Tensor(text).int()
            length = torch.Tensor(length).int()
            images = images.to(device)

            preds = net(images)
            preds_size = torch.Tensor([preds.size(0)] * batch_size).int()
            preds.requires_grad_(True)
            loss = criterion(preds, text, preds_size, length) # text,preds_size must be cpu  # BREAK
            # backward
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()  # BREAK

            _, preds = preds.max(2)
            preds = preds.squeeze(1)
            preds = preds.transpose(1, 0).contiguous().view(-1)
            sim_preds = converter.decode(preds.cpu().data, preds_size.cpu().data, raw=False)
            for pred, target in zip(sim_preds, labels):
                if pred == target:
                    n_correct += 1
            # write tensorboard
            cur_step = epoch * (train_dataset.__len__() / batch_size) + i
            writer.add_scalar(tag='Train/loss', scalar_value=loss.item(), global_step=cur_step)
            writer.add_scalar(tag='Train/acc', scalar_value=n_correct / batch_size, global_step=cur_step)
            writer.add_scalar(tag='Train/lr', scalar_value=scheduler.get_lr()[0], global_step=cur_step)
            # display msg
            if (i + 1) % opt.displayInterval == 0:
                batch_time = time.time() - start
                start = time.time()
                print('[%d/%d][%d/%d] Loss:%f Acc:%.f Time:%fs Lr:%f' % (
                epoch, opt.epochs, (i + 1), len(train_loader), loss / batch_size, n_correct / batch_size, batch_time,
                scheduler.get_lr()[0]))
        # test
        val_acc,val_loss = val(net, test_loader, criterion, converter, device)
        # write tensorboard
        writer.add_scalar(tag='Eval/acc', scalar_value=val_acc, global_step=cur_step)
        writer.add_scalar(tag='Eval/loss', scalar_value=val_loss, global_step=cur_step)
        # save params
        saved.append('{0}/netCRNN_{1}.pth'.format(opt.output_dir, epoch))
    # save final model
    saved.append(opt.output_dir + '/model.pkl')
    writer.close()
    return val_acc, val_loss, writer.records


class Opt(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def target():
    torch.manual_seed(0)
    alphabet = '0123456789'

    def batches(n, bs, lo=2, hi=4):
        out = []
        for _ in range(n):
            labels = [''.join(alphabet[int(c)] for c in torch.randint(0, 10, (int(torch.randint(lo, hi, ())),)))
                      for _ in range(bs)]
            out.append((torch.randn(bs, 1, 8, 32), labels))
        return Loader(out)

    train_loader, test_loader = batches(3, 3), batches(1, 3)
    common = dict(imgH=8, imgW=32, nh=8, alphabet=alphabet, output_dir='expr', n_test_disp=2, beta1=0.5)
    opt1 = Opt(epochs=2, lr=0.01, displayInterval=1, seed=1, **common)
    opt2 = Opt(epochs=1, lr=0.001, displayInterval=2, seed=2, **common)
    return [
        (train, (opt1, train_loader, test_loader), {}),
        (train, (opt2, train_loader, test_loader), {}),
    ]


EXPECT = ("none: the label path is string processing (`converter.encode` on Python strings, `converter.decode` "
          "looping over tensor elements with data-dependent `if t[i] != 0 and ...` tests and string indexing) "
          "around a CTC step; breaks expected at `torch.Tensor(text).int()` (a Python list), the decode loop's "
          "`if t[i] != 0 ...` and `self.alphabet[...]` lines, `optimizer.step()`, `loss.item()`, "
          "`scheduler.get_lr()`, the `time.time()` lines and the `print(pandas.DataFrame(...))`")
