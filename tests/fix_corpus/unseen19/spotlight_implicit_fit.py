"""Implicit-feedback matrix factorisation training from maciejkula/spotlight
(`spotlight/factorization/implicit.py` `ImplicitFactorizationModel`, stored revision 448f891;
`spotlight/factorization/representations.py` `BilinearNet`; `spotlight/layers.py` `ScaledEmbedding`,
`ZeroEmbedding`; `spotlight/losses.py` `pointwise_loss`, `bpr_loss`, `hinge_loss`, `adaptive_hinge_loss`;
`spotlight/sampling.py` `sample_items`; `spotlight/torch_utils.py` `gpu`, `cpu`, `minibatch`, `shuffle`,
`set_seed`). `fit` casts the interaction arrays with NumPy, lazily builds the network and the Adam optimizer on the
first call (`_initialize`), checks ids with `user_ids.max()` comparisons, and for each epoch shuffles with a NumPy
`RandomState`, converts with `torch.from_numpy`, iterates the `minibatch` generator, draws negative items with
`random_state.randint` (`_get_negative_prediction`, or `_get_multiple_negative_predictions` with `reshape`/`view`
for the adaptive hinge loss), accumulates `loss.item()`, steps the optimizer, prints when `verbose`, and raises on
`np.isnan(epoch_loss) or epoch_loss == 0.0`.
Adaptations: `fit` ends with `return epoch_loss` (the original returns nothing; the added line makes the calls'
outputs comparable). `Interactions` (scipy-backed) is a stand-in holding `user_ids`, `item_ids`, `num_users`,
`num_items`; `predict`/`__repr__` (which need `_components._predict_process_ids` and `helpers._repr_model`) and the
Bloom embeddings of `layers.py` are left out. Two models are built in the factory (BPR loss, and adaptive hinge loss
with verbose printing), each with its own seeded `RandomState`, and each call fits one of them on random
interactions made in the factory; `fit` trains (and builds the net on the first call), so a call repeats exactly
only on a fresh copy. Randomness: the model's NumPy `RandomState` (an argument, restored by copying) and torch's
global generator (the embedding initialisation in `_initialize`), seeded in the factory."""
import numpy as np

import torch

import torch.nn as nn

import torch.optim as optim


# ---- spotlight/torch_utils.py
def gpu(tensor, gpu=False):

    if gpu:
        return tensor.cuda()
    else:
        return tensor


def cpu(tensor):

    if tensor.is_cuda:
        return tensor.cpu()
    else:
        return tensor


def minibatch(*tensors, **kwargs):

    batch_size = kwargs.get('batch_size', 128)

    if len(tensors) == 1:
        tensor = tensors[0]
        for i in range(0, len(tensor), batch_size):
            yield tensor[i:i + batch_size]
    else:
        for i in range(0, len(tensors[0]), batch_size):
            yield tuple(x[i:i + batch_size] for x in tensors)


def shuffle(*arrays, **kwargs):

    random_state = kwargs.get('random_state')

    if len(set(len(x) for x in arrays)) != 1:
        raise ValueError('All inputs to shuffle must have '
                         'the same length.')

    if random_state is None:
        random_state = np.random.RandomState()

    shuffle_indices = np.arange(len(arrays[0]))
    random_state.shuffle(shuffle_indices)  # BREAK

    if len(arrays) == 1:
        return arrays[0][shuffle_indices]
    else:
        return tuple(x[shuffle_indices] for x in arrays)


def set_seed(seed, cuda=False):

    torch.manual_seed(seed)

    if cuda:
        torch.cuda.manual_seed(seed)


# ---- spotlight/sampling.py
def sample_items(num_items, shape, random_state=None):

    if random_state is None:
        random_state = np.random.RandomState()

    items = random_state.randint(0, num_items, shape, dtype=np.int64)  # BREAK

    return items


# ---- spotlight/losses.py
def pointwise_loss(positive_predictions, negative_predictions, mask=None):

    positives_loss = (1.0 - torch.sigmoid(positive_predictions))
    negatives_loss = torch.sigmoid(negative_predictions)

    loss = (positives_loss + negatives_loss)

    if mask is not None:
        mask = mask.float()
        loss = loss * mask
        return loss.sum() / mask.sum()

    return loss.mean()


def bpr_loss(positive_predictions, negative_predictions, mask=None):

    loss = (1.0 - torch.sigmoid(positive_predictions -
                                negative_predictions))

    if mask is not None:
        mask = mask.float()
        loss = loss * mask
        return loss.sum() / mask.sum()

    return loss.mean()


def hinge_loss(positive_predictions, negative_predictions, mask=None):

    loss = torch.clamp(negative_predictions -
                       positive_predictions +
                       1.0, 0.0)

    if mask is not None:
        mask = mask.float()
        loss = loss * mask
        return loss.sum() / mask.sum()

    return loss.mean()


def adaptive_hinge_loss(positive_predictions, negative_predictions, mask=None):

    highest_negative_predictions, _ = torch.max(negative_predictions, 0)

    return hinge_loss(positive_predictions, highest_negative_predictions.squeeze(), mask=mask)


# ---- spotlight/layers.py
class ScaledEmbedding(nn.Embedding):
    """
    Embedding layer that initialises its values
    to using a normal variable scaled by the inverse
    of the embedding dimension.
    """

    def reset_parameters(self):
        """
        Initialize parameters.
        """

        self.weight.data.normal_(0, 1.0 / self.embedding_dim)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx].fill_(0)


class ZeroEmbedding(nn.Embedding):
    """
    Used for biases.
    """

    def reset_parameters(self):
        """
        Initialize parameters.
        """

        self.weight.data.zero_()
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx].fill_(0)


# ---- spotlight/factorization/representations.py
class BilinearNet(nn.Module):

    def __init__(self, num_users, num_items, embedding_dim=32,
                 user_embedding_layer=None, item_embedding_layer=None, sparse=False):

        super(BilinearNet, self).__init__()  # BREAK

        self.embedding_dim = embedding_dim

        if user_embedding_layer is not None:
            self.user_embeddings = user_embedding_layer
        else:
            self.user_embeddings = ScaledEmbedding(num_users, embedding_dim,  # BREAK
                                                   sparse=sparse)

        if item_embedding_layer is not None:
            self.item_embeddings = item_embedding_layer
        else:
            self.item_embeddings = ScaledEmbedding(num_items, embedding_dim,
                                                   sparse=sparse)

        self.user_biases = ZeroEmbedding(num_users, 1, sparse=sparse)
        self.item_biases = ZeroEmbedding(num_items, 1, sparse=sparse)

    def forward(self, user_ids, item_ids):

        user_embedding = self.user_embeddings(user_ids)
        item_embedding = self.item_embeddings(item_ids)

        user_embedding = user_embedding.squeeze()
        item_embedding = item_embedding.squeeze()

        user_bias = self.user_biases(user_ids).squeeze()
        item_bias = self.item_biases(item_ids).squeeze()

        dot = (user_embedding * item_embedding).sum(1)

        return dot + user_bias + item_bias


# ---- spotlight/factorization/implicit.py
class ImplicitFactorizationModel(object):

    def __init__(self,
                 loss='pointwise',
                 embedding_dim=32,
                 n_iter=10,
                 batch_size=256,
                 l2=0.0,
                 learning_rate=1e-2,
                 optimizer_func=None,
                 use_cuda=False,
                 representation=None,
                 sparse=False,
                 random_state=None,
                 num_negative_samples=5):

        assert loss in ('pointwise',
                        'bpr',
                        'hinge',
                        'adaptive_hinge')

        self._loss = loss
        self._embedding_dim = embedding_dim
        self._n_iter = n_iter
        self._learning_rate = learning_rate
        self._batch_size = batch_size
        self._l2 = l2
        self._use_cuda = use_cuda
        self._representation = representation
        self._sparse = sparse
        self._optimizer_func = optimizer_func
        self._random_state = random_state or np.random.RandomState()
        self._num_negative_samples = num_negative_samples

        self._num_users = None
        self._num_items = None
        self._net = None
        self._optimizer = None
        self._loss_func = None

        set_seed(self._random_state.randint(-10**8, 10**8),
                 cuda=self._use_cuda)

    @property
    def _initialized(self):
        return self._net is not None

    def _initialize(self, interactions):

        (self._num_users,
         self._num_items) = (interactions.num_users,
                             interactions.num_items)

        if self._representation is not None:
            self._net = gpu(self._representation,
                            self._use_cuda)
        else:
            self._net = gpu(
                BilinearNet(self._num_users,
                            self._num_items,
                            self._embedding_dim,
                            sparse=self._sparse),
                self._use_cuda
            )

        if self._optimizer_func is None:
            self._optimizer = optim.Adam(  # BREAK
                self._net.parameters(),
                weight_decay=self._l2,
                lr=self._learning_rate
            )
        else:
            self._optimizer = self._optimizer_func(self._net.parameters())

        if self._loss == 'pointwise':
            self._loss_func = pointwise_loss
        elif self._loss == 'bpr':
            self._loss_func = bpr_loss
        elif self._loss == 'hinge':
            self._loss_func = hinge_loss
        else:
            self._loss_func = adaptive_hinge_loss

    def _check_input(self, user_ids, item_ids, allow_items_none=False):

        if isinstance(user_ids, int):
            user_id_max = user_ids
        else:
            user_id_max = user_ids.max()

        if user_id_max >= self._num_users:  # BREAK
            raise ValueError('Maximum user id greater '
                             'than number of users in model.')

        if allow_items_none and item_ids is None:
            return

        if isinstance(item_ids, int):
            item_id_max = item_ids
        else:
            item_id_max = item_ids.max()

        if item_id_max >= self._num_items:  # BREAK
            raise ValueError('Maximum item id greater '
                             'than number of items in model.')

    def fit(self, interactions, verbose=False):

        user_ids = interactions.user_ids.astype(np.int64)
        item_ids = interactions.item_ids.astype(np.int64)

        if not self._initialized:
            self._initialize(interactions)

        self._check_input(user_ids, item_ids)

        for epoch_num in range(self._n_iter):

            users, items = shuffle(user_ids,
                                   item_ids,
                                   random_state=self._random_state)

            user_ids_tensor = gpu(torch.from_numpy(users),
                                  self._use_cuda)
            item_ids_tensor = gpu(torch.from_numpy(items),
                                  self._use_cuda)

            epoch_loss = 0.0

            for (minibatch_num,
                 (batch_user,
                  batch_item)) in enumerate(minibatch(user_ids_tensor,
                                                      item_ids_tensor,
                                                      batch_size=self._batch_size)):

                positive_prediction = self._net(batch_user, batch_item)

                if self._loss == 'adaptive_hinge':
                    negative_prediction = self._get_multiple_negative_predictions(
                        batch_user, n=self._num_negative_samples)
                else:
                    negative_prediction = self._get_negative_prediction(batch_user)

                self._optimizer.zero_grad()

                loss = self._loss_func(positive_prediction, negative_prediction)
                epoch_loss += loss.item()

                loss.backward()
                self._optimizer.step()  # BREAK

            epoch_loss /= minibatch_num + 1

            if verbose:
                print('Epoch {}: loss {}'.format(epoch_num, epoch_loss))

            if np.isnan(epoch_loss) or epoch_loss == 0.0:
                raise ValueError('Degenerate epoch loss: {}'
                                 .format(epoch_loss))
        return epoch_loss

    def _get_negative_prediction(self, user_ids):

        negative_items = sample_items(
            self._num_items,
            len(user_ids),
            random_state=self._random_state)
        negative_var = gpu(torch.from_numpy(negative_items), self._use_cuda)

        negative_prediction = self._net(user_ids, negative_var)

        return negative_prediction

    def _get_multiple_negative_predictions(self, user_ids, n=5):

        batch_size = user_ids.size(0)

        negative_prediction = self._get_negative_prediction(user_ids
                                                            .view(batch_size, 1)
                                                            .expand(batch_size, n)
                                                            .reshape(batch_size * n))

        return negative_prediction.view(n, len(user_ids))


# ---- stand-in for spotlight.interactions.Interactions
class Interactions(object):
    def __init__(self, user_ids, item_ids, num_users, num_items):
        self.user_ids = user_ids
        self.item_ids = item_ids
        self.num_users = num_users
        self.num_items = num_items


def target():
    torch.manual_seed(0)
    rs = np.random.RandomState(0)
    data1 = Interactions(rs.randint(0, 20, 96).astype(np.int32), rs.randint(0, 30, 96).astype(np.int32), 20, 30)
    data2 = Interactions(rs.randint(0, 15, 80).astype(np.int32), rs.randint(0, 25, 80).astype(np.int32), 15, 25)
    model1 = ImplicitFactorizationModel(loss='bpr', embedding_dim=8, n_iter=2, batch_size=32,
                                        random_state=np.random.RandomState(1))
    model2 = ImplicitFactorizationModel(loss='adaptive_hinge', embedding_dim=8, n_iter=2, batch_size=32,
                                        num_negative_samples=3, random_state=np.random.RandomState(2))
    return [
        (ImplicitFactorizationModel.fit, (model1, data1), {}),
        (ImplicitFactorizationModel.fit, (model2, data2), {"verbose": True}),
    ]


EXPECT = ("extract: the NumPy shuffling/negative sampling, loss.item() accumulation, verbose print and the "
          "degenerate-loss check are host-side; the forward/loss of each minibatch is the compilable part, with the "
          "optimizer step as eager glue")
