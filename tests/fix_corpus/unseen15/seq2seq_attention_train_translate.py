"""The attention seq2seq tutorial from graykode/nlp-tutorial (`4-2.Seq2Seq(Attention)/Seq2Seq(Attention)-Torch.py`,
the stored revision): module-level vocabulary built from `set(...)` of the three sentences (`word_dict`,
`number_dict`, `n_class`), `make_batch` (`np.eye(n_class)[[word_dict[n] for n in ...]]` one-hot lists wrapped in
`Variable(torch.Tensor(...))`), the `Attention` module (`nn.RNN` encoder/decoder with `dropout=0.5` on one layer,
`forward` with `Variable(torch.empty([n_step, 1, n_class]))` filled row by row `model[i] = self.out(...)`, a
per-step loop that appends `attn_weights.squeeze().data.numpy()` to `trained_attn`, `get_att_weight` writing
scores one by one into `Variable(torch.zeros(n_step))` with a Python loop and `F.softmax` without `dim`,
`get_att_score` as `torch.dot` of flattened vectors), the training loop (`zero_grad`, `criterion(output,
target_batch.squeeze(0))`, a `'{:.6f}'.format(loss)` print every 400 epochs, `backward`, `step`) and the test
(`predict.data.max(1, keepdim=True)[1]`, `[number_dict[n.item()] for n in predict.squeeze()]`).
Adaptations: the module-level script is wrapped in the called function `run(sentences, epochs, print_every)`,
which rebuilds the vocabulary globals from its sentences (sorted, since `set` order would differ between
processes), seeds torch, builds the model and optimizer as the script does, trains for a few epochs and returns the
loss, the predicted words and the attention matrix; `n_hidden` is 16 (128 upstream); the matplotlib attention
plot is not carried (matplotlib is not installed); the print interval is an argument (400 upstream)."""
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
import torch.nn.functional as F

dtype = torch.FloatTensor
# S: Symbol that shows starting of decoding input
# E: Symbol that shows starting of decoding output
# P: Symbol that will fill in blank sequence if current batch data size is short than time steps
sentences = ['ich mochte ein bier P', 'S i want a beer', 'i want a beer E']

word_list = None
word_dict = None
number_dict = None
n_class = None

# Parameter
n_hidden = 16


def build_vocab(sentences):
    """Adaptation: the module-level vocabulary lines, run per call (sorted for a stable order)."""
    global word_list, word_dict, number_dict, n_class
    word_list = " ".join(sentences).split()
    word_list = sorted(set(word_list))
    word_dict = {w: i for i, w in enumerate(word_list)}
    number_dict = {i: w for i, w in enumerate(word_list)}
    n_class = len(word_dict)  # vocab list


def make_batch(sentences):
    input_batch = [np.eye(n_class)[[word_dict[n] for n in sentences[0].split()]]]
    output_batch = [np.eye(n_class)[[word_dict[n] for n in sentences[1].split()]]]
    target_batch = [[word_dict[n] for n in sentences[2].split()]]

    # make tensor
    return Variable(torch.Tensor(input_batch)), Variable(torch.Tensor(output_batch)), Variable(torch.LongTensor(target_batch))


class Attention(nn.Module):
    def __init__(self):
        super(Attention, self).__init__()
        self.enc_cell = nn.RNN(input_size=n_class, hidden_size=n_hidden, dropout=0.5)
        self.dec_cell = nn.RNN(input_size=n_class, hidden_size=n_hidden, dropout=0.5)

        # Linear for attention
        self.attn = nn.Linear(n_hidden, n_hidden)
        self.out = nn.Linear(n_hidden * 2, n_class)

    def forward(self, enc_inputs, hidden, dec_inputs):
        enc_inputs = enc_inputs.transpose(0, 1)  # enc_inputs: [n_step(=n_step, time step), batch_size, n_hidden]
        dec_inputs = dec_inputs.transpose(0, 1)  # dec_inputs: [n_step(=n_step, time step), batch_size, n_hidden]

        # enc_outputs : [n_step, batch_size, num_directions(=1) * n_hidden], matrix F
        # enc_hidden : [num_layers(=1) * num_directions(=1), batch_size, n_hidden]
        enc_outputs, enc_hidden = self.enc_cell(enc_inputs, hidden)

        trained_attn = []
        hidden = enc_hidden
        n_step = len(dec_inputs)
        model = Variable(torch.empty([n_step, 1, n_class]))

        for i in range(n_step):  # each time step
            # dec_output : [n_step(=1), batch_size(=1), num_directions(=1) * n_hidden]
            # hidden : [num_layers(=1) * num_directions(=1), batch_size(=1), n_hidden]
            dec_output, hidden = self.dec_cell(dec_inputs[i].unsqueeze(0), hidden)
            attn_weights = self.get_att_weight(dec_output, enc_outputs)  # attn_weights : [1, 1, n_step]
            trained_attn.append(attn_weights.squeeze().data.numpy())

            # matrix-matrix product of matrices [1,1,n_step] x [1,n_step,n_hidden] = [1,1,n_hidden]
            context = attn_weights.bmm(enc_outputs.transpose(0, 1))
            dec_output = dec_output.squeeze(0)  # dec_output : [batch_size(=1), num_directions(=1) * n_hidden]
            context = context.squeeze(1)  # [1, num_directions(=1) * n_hidden]
            model[i] = self.out(torch.cat((dec_output, context), 1))

        # make model shape [n_step, n_class]
        return model.transpose(0, 1).squeeze(0), trained_attn

    def get_att_weight(self, dec_output, enc_outputs):  # get attention weight one 'dec_output' with 'enc_outputs'
        n_step = len(enc_outputs)
        attn_scores = Variable(torch.zeros(n_step))  # attn_scores : [n_step]

        for i in range(n_step):
            attn_scores[i] = self.get_att_score(dec_output, enc_outputs[i])

        # Normalize scores to weights in range 0 to 1
        return F.softmax(attn_scores).view(1, 1, -1)

    def get_att_score(self, dec_output, enc_output):  # enc_outputs [batch_size, num_directions(=1) * n_hidden]
        score = self.attn(enc_output)  # score : [batch_size, n_hidden]
        return torch.dot(dec_output.view(-1), score.view(-1))  # inner product make scalar value


def run(sentences, epochs=20, print_every=400):
    """Adaptation: the tutorial's script body (vocabulary, model, train, test) as a function."""
    build_vocab(sentences)
    torch.manual_seed(0)  # BREAK
    input_batch, output_batch, target_batch = make_batch(sentences)

    # hidden : [num_layers(=1) * num_directions(=1), batch_size, n_hidden]
    hidden = Variable(torch.zeros(1, 1, n_hidden))

    model = Attention()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)

    # Train
    for epoch in range(epochs):
        optimizer.zero_grad()
        output, _ = model(input_batch, hidden, output_batch)

        loss = criterion(output, target_batch.squeeze(0))
        if (epoch + 1) % print_every == 0:
            print('Epoch:', '%04d' % (epoch + 1), 'cost =', '{:.6f}'.format(loss))

        loss.backward()
        optimizer.step()

    # Test
    predict, trained_attn = model(input_batch, hidden, output_batch)
    predict = predict.data.max(1, keepdim=True)[1]
    words = [number_dict[n.item()] for n in predict.squeeze()]
    print(sentences[0], '->', words)
    return loss.detach(), words, torch.tensor(np.array(trained_attn))


def target():
    torch.manual_seed(0)
    sentences2 = ['je voudrais une biere rouge P', 'S i would like a red', 'i would like a red E']
    return [
        (run, (sentences, 12, 4), {}),
        (run, (sentences2, 8, 400), {}),
    ]


EXPECT = ("extract: the decoder loop records `attn_weights.squeeze().data.numpy()` each step, a NumPy conversion "
          "inside `forward` that cannot be traced; the attention bookkeeping belongs outside the compiled step "
          "(the per-step scalar writes into `attn_scores[i]` and `model[i]` are traceable), and the training "
          "driver's print/optimizer steps and the `.item()` word lookup stay eager")
