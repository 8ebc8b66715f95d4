"""Sentence-embedding paraphrase mining: chunked cosine scores, `torch.topk(...)` then
`scores_top_k_values.cpu().tolist()` / `scores_top_k_idx.cpu().tolist()` feeding a `queue.PriorityQueue` of
`(score, i, j)` triples, de-duplication through a set and a final `sorted(..., key=lambda x: x[0])`
(UKPLab/sentence-transformers sentence_transformers/util.py: paraphrase_mining, paraphrase_mining_embeddings,
cos_sim). `model.encode` is a stand-in: a mean-pooled embedding bag over token ids (no tokenizer or transformer is
installed), called by `paraphrase_mining` on pre-tokenized sentences; chunk sizes and `top_k` are shrunk."""
import queue
from typing import Callable, List

import torch
import torch.nn as nn
from torch import Tensor


def cos_sim(a: Tensor, b: Tensor):
    """
    Computes the cosine similarity cos_sim(a[i], b[j]) for all i and j.
    :return: Matrix with res[i][j]  = cos_sim(a[i], b[j])
    """
    if not isinstance(a, torch.Tensor):
        a = torch.tensor(a)

    if not isinstance(b, torch.Tensor):
        b = torch.tensor(b)

    if len(a.shape) == 1:
        a = a.unsqueeze(0)

    if len(b.shape) == 1:
        b = b.unsqueeze(0)

    a_norm = torch.nn.functional.normalize(a, p=2, dim=1)
    b_norm = torch.nn.functional.normalize(b, p=2, dim=1)
    return torch.mm(a_norm, b_norm.transpose(0, 1))


def paraphrase_mining_embeddings(embeddings: Tensor,
                      query_chunk_size: int = 5000,
                      corpus_chunk_size: int = 100000,
                      max_pairs: int = 500000,
                      top_k: int = 100,
                      score_function: Callable[[Tensor, Tensor], Tensor] = cos_sim):
    """
    Given a list of sentences / texts, this function performs paraphrase mining. It compares all sentences against all
    other sentences and returns a list with the pairs that have the highest cosine similarity score.

    :return: Returns a list of triplets with the format [score, id1, id2]
    """

    top_k += 1  # A sentence has the highest similarity to itself. Increase +1 as we are interest in distinct pairs

    # Mine for duplicates
    pairs = queue.PriorityQueue()  # BREAK
    min_score = -1
    num_added = 0

    for corpus_start_idx in range(0, len(embeddings), corpus_chunk_size):
        for query_start_idx in range(0, len(embeddings), query_chunk_size):
            scores = score_function(embeddings[query_start_idx:query_start_idx+query_chunk_size], embeddings[corpus_start_idx:corpus_start_idx+corpus_chunk_size])

            scores_top_k_values, scores_top_k_idx = torch.topk(scores, min(top_k, len(scores[0])), dim=1, largest=True, sorted=False)
            scores_top_k_values = scores_top_k_values.cpu().tolist()  # BREAK
            scores_top_k_idx = scores_top_k_idx.cpu().tolist()

            for query_itr in range(len(scores)):
                for top_k_idx, corpus_itr in enumerate(scores_top_k_idx[query_itr]):
                    i = query_start_idx + query_itr
                    j = corpus_start_idx + corpus_itr

                    if i != j and scores_top_k_values[query_itr][top_k_idx] > min_score:
                        pairs.put((scores_top_k_values[query_itr][top_k_idx], i, j))
                        num_added += 1

                        if num_added >= max_pairs:
                            entry = pairs.get()
                            min_score = entry[0]

    # Get the pairs
    added_pairs = set()  # Used for duplicate detection
    pairs_list = []
    while not pairs.empty():
        score, i, j = pairs.get()
        sorted_i, sorted_j = sorted([i, j])

        if sorted_i != sorted_j and (sorted_i, sorted_j) not in added_pairs:
            added_pairs.add((sorted_i, sorted_j))
            pairs_list.append([score, i, j])

    # Highest scores first
    pairs_list = sorted(pairs_list, key=lambda x: x[0], reverse=True)
    return pairs_list


class MeanEmbeddingEncoder(nn.Module):
    """Stand-in for SentenceTransformer.encode(..., convert_to_tensor=True) on pre-tokenized sentences."""

    def __init__(self, vocab_size=50, dim=16):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab_size, dim, mode='mean')

    def encode(self, sentences, show_progress_bar=False, batch_size=32, convert_to_tensor=True):
        return self.emb(sentences)


def paraphrase_mining(model,
                      sentences: List[str],
                      show_progress_bar: bool = False,
                      batch_size:int = 32,
                      *args,
                      **kwargs):
    """
    Given a list of sentences / texts, this function performs paraphrase mining. It compares all sentences against all
    other sentences and returns a list with the pairs that have the highest cosine similarity score.
    """

    # Compute embedding for the sentences
    embeddings = model.encode(sentences, show_progress_bar=show_progress_bar, batch_size=batch_size, convert_to_tensor=True)

    return paraphrase_mining_embeddings(embeddings, *args, **kwargs)


def target():
    torch.manual_seed(0)
    model = MeanEmbeddingEncoder().eval()
    sentences1 = torch.randint(0, 50, (12, 6))
    sentences2 = torch.randint(0, 50, (12, 6))
    kwargs = dict(query_chunk_size=5, corpus_chunk_size=8, max_pairs=20, top_k=3)
    return [
        (paraphrase_mining, (model, sentences1), dict(kwargs)),
        (paraphrase_mining, (model, sentences2), dict(kwargs)),
    ]


EXPECT = ("extract: move the host-side result assembly (the `.cpu().tolist()` read-backs, the `queue.PriorityQueue` "
          "bookkeeping and the de-duplication) into a helper under an escape hatch; the embeddings, chunked cosine "
          "scores and top-k stay compiled")
