"""GRU4Rec scoring all items for the next-item prediction: the session encoder is an `nn.GRU` module called in
forward (`gru_output, _ = self.gru_layers(item_seq_emb_dropout)`), then the last valid step is gathered
(RUCAIBox/RecBole recbole/model/sequential_recommender/gru4rec.py: GRU4Rec.__init__/_init_weights/forward/
full_sort_predict; recbole/model/abstract_recommender.py: SequentialRecommender.gather_indexes). The RecBole
config/dataset objects are reduced to the fields GRU4Rec reads, and `Interaction` is a dict; evaluation mode, so
the embedding dropout draws no random numbers."""
import torch
from torch import nn
from torch.nn.init import xavier_normal_, xavier_uniform_


class SequentialRecommender(nn.Module):
    """
    This is a abstract sequential recommender. All the sequential model should implement This class.
    """

    def __init__(self, config, dataset):
        super(SequentialRecommender, self).__init__()

        # load dataset info
        self.USER_ID = config['USER_ID_FIELD']
        self.ITEM_ID = config['ITEM_ID_FIELD']
        self.ITEM_SEQ = self.ITEM_ID + config['LIST_SUFFIX']
        self.ITEM_SEQ_LEN = config['ITEM_LIST_LENGTH_FIELD']
        self.POS_ITEM_ID = self.ITEM_ID
        self.NEG_ITEM_ID = config['NEG_PREFIX'] + self.ITEM_ID
        self.max_seq_length = config['MAX_ITEM_LIST_LENGTH']
        self.n_items = dataset.num(self.ITEM_ID)

    def gather_indexes(self, output, gather_index):
        """Gathers the vectors at the specific positions over a minibatch"""
        gather_index = gather_index.view(-1, 1, 1).expand(-1, -1, output.shape[-1])
        output_tensor = output.gather(dim=1, index=gather_index)
        return output_tensor.squeeze(1)


class GRU4Rec(SequentialRecommender):
    r"""GRU4Rec is a model that incorporate RNN for recommendation.

    Note:

        Regarding the innovation of this article,we can only achieve the data augmentation mentioned
        in the paper and directly output the embedding of the item,
        in order that the generation method we used is common to other sequential models.
    """

    def __init__(self, config, dataset):
        super(GRU4Rec, self).__init__(config, dataset)

        # load parameters info
        self.embedding_size = config['embedding_size']
        self.hidden_size = config['hidden_size']
        self.loss_type = config['loss_type']
        self.num_layers = config['num_layers']
        self.dropout_prob = config['dropout_prob']

        # define layers and loss
        self.item_embedding = nn.Embedding(self.n_items, self.embedding_size, padding_idx=0)
        self.emb_dropout = nn.Dropout(self.dropout_prob)
        self.gru_layers = nn.GRU(
            input_size=self.embedding_size,
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            bias=False,
            batch_first=True,
        )
        self.dense = nn.Linear(self.hidden_size, self.embedding_size)
        if self.loss_type == 'CE':
            self.loss_fct = nn.CrossEntropyLoss()
        else:
            raise NotImplementedError("Make sure 'loss_type' in ['BPR', 'CE']!")

        # parameters initialization
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Embedding):
            xavier_normal_(module.weight)
        elif isinstance(module, nn.GRU):
            xavier_uniform_(self.gru_layers.weight_hh_l0)
            xavier_uniform_(self.gru_layers.weight_ih_l0)

    def forward(self, item_seq, item_seq_len):
        item_seq_emb = self.item_embedding(item_seq)
        item_seq_emb_dropout = self.emb_dropout(item_seq_emb)
        gru_output, _ = self.gru_layers(item_seq_emb_dropout)  # BREAK
        gru_output = self.dense(gru_output)
        # the embedding of the predicted item, shape of (batch_size, embedding_size)
        seq_output = self.gather_indexes(gru_output, item_seq_len - 1)
        return seq_output

    def calculate_loss(self, interaction):
        item_seq = interaction[self.ITEM_SEQ]
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        seq_output = self.forward(item_seq, item_seq_len)
        pos_items = interaction[self.POS_ITEM_ID]
        test_item_emb = self.item_embedding.weight
        logits = torch.matmul(seq_output, test_item_emb.transpose(0, 1))
        loss = self.loss_fct(logits, pos_items)
        return loss

    def full_sort_predict(self, interaction):
        item_seq = interaction[self.ITEM_SEQ]
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        seq_output = self.forward(item_seq, item_seq_len)
        test_items_emb = self.item_embedding.weight
        scores = torch.matmul(seq_output, test_items_emb.transpose(0, 1))  # [B, n_items]
        return scores


class _Dataset:
    """Stand-in for the RecBole dataset: only `num(field)` is read."""

    def __init__(self, n_items):
        self.n_items = n_items

    def num(self, field):
        return self.n_items


def target():
    torch.manual_seed(0)
    config = {
        'USER_ID_FIELD': 'user_id', 'ITEM_ID_FIELD': 'item_id', 'LIST_SUFFIX': '_list',
        'ITEM_LIST_LENGTH_FIELD': 'item_length', 'NEG_PREFIX': 'neg_', 'MAX_ITEM_LIST_LENGTH': 10,
        'embedding_size': 16, 'hidden_size': 32, 'loss_type': 'CE', 'num_layers': 1, 'dropout_prob': 0.3,
    }
    model = GRU4Rec(config, _Dataset(n_items=50)).eval()

    def interaction():
        item_length = torch.randint(2, 11, (4,))
        item_id_list = torch.randint(1, 50, (4, 10))
        item_id_list[torch.arange(10)[None, :] >= item_length[:, None]] = 0  # right padding
        return {'item_id_list': item_id_list, 'item_length': item_length}

    return [
        (model.full_sort_predict, (interaction(),), {}),
        (model.full_sort_predict, (interaction(),), {}),
    ]


EXPECT = ("config: set `torch._dynamo.config.allow_rnn = True` so the GRU is traced instead of being left to eager "
          "(the gather and the item scoring are plain tensor ops)")
