"""Scene-text recognition evaluation with a CTC head (clovaai/deep-text-recognition-benchmark `test.py`:
`validation`, the evaluation block of `test`; `utils.py`: `CTCLabelConverter` (the revision with
`encode(text, batch_max_length)` padding to a `[batch, batch_max_length]` tensor), `Averager`). Per batch:
`torch.IntTensor([opt.batch_max_length] * batch_size)`, `converter.encode` (a Python loop filling `torch.LongTensor`
rows), `time.time()` around the forward, `preds_size = torch.IntTensor([preds.size(1)] * batch_size)`, the CTC loss
on `log_softmax(2).permute(1, 0, 2)`, greedy `preds.max(2)` and `converter.decode(preds_index.data,
preds_size.data)`, which loops over the lengths tensor and tests `t[i] != 0 and (not (i > 0 and t[i - 1] ==
t[i]))` on tensor elements, indexing the character list with `t[i]`; then per sample the string comparison, the
ICDAR2019 normalised edit distance and `pred_max_prob.cumprod(dim=0)[-1]` in a bare `try/except`; `Averager.add`
keeps `v.data.sum()`.
Adaptations: `nltk.metrics.distance.edit_distance` is not installed and is replaced by a plain Levenshtein
function; the recognition `Model` (TPS/VGG/BiLSTM/CTC) is replaced by a minimal stand-in for the
`None-VGG-None-CTC` configuration (a small conv stack collapsed over the height, a linear CTC head); the LMDB
dataset/`AlignCollate` loader by a list of `(image_tensors, labels)` batches; `opt` by a `SimpleNamespace` with
the fields read here (character set `0-9a-z`, `batch_max_length` 8, 16x32 images, `baiduCTC` off, `sensitive`
and `data_filtering_off` off); log files are left out. The two calls evaluate different batches."""
import re
import time
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.utils.data
import torch.nn.functional as F

device = torch.device('cpu')


def edit_distance(s1, s2):
    """Adaptation: stand-in for nltk.metrics.distance.edit_distance (Levenshtein, unit costs)."""
    prev = list(range(len(s2) + 1))
    for i, c1 in enumerate(s1, 1):
        cur = [i]
        for j, c2 in enumerate(s2, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (c1 != c2)))
        prev = cur
    return prev[-1]


class CTCLabelConverter(object):
    """ Convert between text-label and text-index """

    def __init__(self, character):
        # character (str): set of the possible characters.
        dict_character = list(character)

        self.dict = {}
        for i, char in enumerate(dict_character):
            # NOTE: 0 is reserved for 'CTCblank' token required by CTCLoss
            self.dict[char] = i + 1

        self.character = ['[CTCblank]'] + dict_character  # dummy '[CTCblank]' token for CTCLoss (index 0)

    def encode(self, text, batch_max_length=25):
        length = [len(s) for s in text]

        # The index used for padding (=0) would not affect the CTC loss calculation.
        batch_text = torch.LongTensor(len(text), batch_max_length).fill_(0)
        for i, t in enumerate(text):
            text = list(t)
            text = [self.dict[char] for char in text]
            batch_text[i][:len(text)] = torch.LongTensor(text)
        return (batch_text.to(device), torch.IntTensor(length).to(device))

    def decode(self, text_index, length):
        """ convert text-index into text-label. """
        texts = []
        for index, l in enumerate(length):
            t = text_index[index, :]

            char_list = []
            for i in range(l):  # BREAK
                if t[i] != 0 and (not (i > 0 and t[i - 1] == t[i])):  # removing repeated characters and blank.
                    char_list.append(self.character[t[i]])
            text = ''.join(char_list)

            texts.append(text)
        return texts


class Averager(object):
    """Compute average for torch.Tensor, used for loss average."""

    def __init__(self):
        self.reset()

    def add(self, v):
        count = v.data.numel()
        v = v.data.sum()
        self.n_count += count
        self.sum += v

    def reset(self):
        self.n_count = 0
        self.sum = 0

    def val(self):
        res = 0
        if self.n_count != 0:
            res = self.sum / float(self.n_count)
        return res


class TinyCTCModel(nn.Module):
    """Adaptation: stand-in for Model(opt) with Transformation=None, VGG-like features, SequenceModeling=None, CTC."""

    def __init__(self, input_channel=1, output_channel=16, num_class=37):
        super().__init__()
        self.FeatureExtraction = nn.Sequential(
            nn.Conv2d(input_channel, 8, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(8, output_channel, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d((2, 1), (2, 1)))
        self.AdaptiveAvgPool = nn.AdaptiveAvgPool2d((None, 1))
        self.Prediction = nn.Linear(output_channel, num_class)

    def forward(self, input, text, is_train=True):
        visual_feature = self.FeatureExtraction(input)
        visual_feature = self.AdaptiveAvgPool(visual_feature.permute(0, 3, 1, 2))
        visual_feature = visual_feature.squeeze(3)
        return self.Prediction(visual_feature.contiguous())


def validation(model, criterion, evaluation_loader, converter, opt):
    """ validation or evaluation """
    n_correct = 0
    norm_ED = 0
    length_of_data = 0
    infer_time = 0
    valid_loss_avg = Averager()

    for i, (image_tensors, labels) in enumerate(evaluation_loader):
        batch_size = image_tensors.size(0)
        length_of_data = length_of_data + batch_size
        image = image_tensors.to(device)
        # For max length prediction
        length_for_pred = torch.IntTensor([opt.batch_max_length] * batch_size).to(device)
        text_for_pred = torch.LongTensor(batch_size, opt.batch_max_length + 1).fill_(0).to(device)

        text_for_loss, length_for_loss = converter.encode(labels, batch_max_length=opt.batch_max_length)

        start_time = time.time()  # BREAK
        if 'CTC' in opt.Prediction:
            preds = model(image, text_for_pred)
            forward_time = time.time() - start_time

            # Calculate evaluation loss for CTC deocder.
            preds_size = torch.IntTensor([preds.size(1)] * batch_size)
            # permute 'preds' to use CTCloss format
            if opt.baiduCTC:
                cost = criterion(preds.permute(1, 0, 2), text_for_loss, preds_size, length_for_loss) / batch_size
            else:
                cost = criterion(preds.log_softmax(2).permute(1, 0, 2), text_for_loss, preds_size, length_for_loss)

            # Select max probabilty (greedy decoding) then decode index to character
            if opt.baiduCTC:
                _, preds_index = preds.max(2)
                preds_index = preds_index.view(-1)
            else:
                _, preds_index = preds.max(2)
            preds_str = converter.decode(preds_index.data, preds_size.data)

        else:
            raise NotImplementedError("adaptation: only the CTC branch is kept")

        infer_time += forward_time
        valid_loss_avg.add(cost)

        # calculate accuracy & confidence score
        preds_prob = F.softmax(preds, dim=2)
        preds_max_prob, _ = preds_prob.max(dim=2)
        confidence_score_list = []
        for gt, pred, pred_max_prob in zip(labels, preds_str, preds_max_prob):
            if 'Attn' in opt.Prediction:
                gt = gt[:gt.find('[s]')]
                pred_EOS = pred.find('[s]')
                pred = pred[:pred_EOS]  # prune after "end of sentence" token ([s])
                pred_max_prob = pred_max_prob[:pred_EOS]

            # To evaluate 'case sensitive model' with alphanumeric and case insensitve setting.
            if opt.sensitive and opt.data_filtering_off:
                pred = pred.lower()
                gt = gt.lower()
                alphanumeric_case_insensitve = '0123456789abcdefghijklmnopqrstuvwxyz'
                out_of_alphanumeric_case_insensitve = f'[^{alphanumeric_case_insensitve}]'
                pred = re.sub(out_of_alphanumeric_case_insensitve, '', pred)
                gt = re.sub(out_of_alphanumeric_case_insensitve, '', gt)

            if pred == gt:
                n_correct += 1

            # ICDAR2019 Normalized Edit Distance
            if len(gt) == 0 or len(pred) == 0:
                norm_ED += 0
            elif len(gt) > len(pred):
                norm_ED += 1 - edit_distance(pred, gt) / len(gt)
            else:
                norm_ED += 1 - edit_distance(pred, gt) / len(pred)

            # calculate confidence score (= multiply of pred_max_prob)
            try:
                confidence_score = pred_max_prob.cumprod(dim=0)[-1]
            except:
                confidence_score = 0  # for empty pred case, when prune after "end of sentence" token ([s])
            confidence_score_list.append(confidence_score)

    accuracy = n_correct / float(length_of_data) * 100
    norm_ED = norm_ED / float(length_of_data)  # ICDAR2019 Normalized Edit Distance

    return valid_loss_avg.val(), accuracy, norm_ED, preds_str, confidence_score_list, labels, infer_time, length_of_data


def evaluate(model, criterion, evaluation_loader, converter, opt):
    model.eval()
    with torch.no_grad():
        valid_loss, accuracy, norm_ED, preds_str, confidence_score_list, labels, _, length_of_data = validation(
            model, criterion, evaluation_loader, converter, opt)
    return valid_loss, accuracy, norm_ED, preds_str, confidence_score_list, labels, length_of_data


def _loader(gen, n_batches, batch_size, character):
    batches = []
    for _ in range(n_batches):
        images = torch.randn(batch_size, 1, 16, 32, generator=gen)
        lengths = torch.randint(1, 6, (batch_size,), generator=gen).tolist()
        labels = [''.join(character[j] for j in torch.randint(0, len(character), (n,), generator=gen).tolist())
                  for n in lengths]
        batches.append((images, labels))
    return batches


def target():
    torch.manual_seed(0)
    opt = SimpleNamespace(character='0123456789abcdefghijklmnopqrstuvwxyz', batch_max_length=8, Prediction='CTC',
                          baiduCTC=False, sensitive=False, data_filtering_off=False)
    converter = CTCLabelConverter(opt.character)
    opt.num_class = len(converter.character)
    model = TinyCTCModel(num_class=opt.num_class)
    criterion = torch.nn.CTCLoss(zero_infinity=True).to(device)
    gen = torch.Generator().manual_seed(3)
    loader1 = _loader(gen, 2, 4, opt.character)
    loader2 = _loader(gen, 3, 3, opt.character)
    return [
        (evaluate, (model, criterion, loader1, converter, opt), {}),
        (evaluate, (model, criterion, loader2, converter, opt), {}),
    ]


EXPECT = ("caller: an evaluation loop whose decoding is host-side Python over tensor elements (`for i in range(l)` "
          "over an `IntTensor` of lengths, `t[i] != 0` branches, `self.character[t[i]]`), string comparisons and edit "
          "distances; compile the model forward (and the CTC loss) and keep `validation` eager")
