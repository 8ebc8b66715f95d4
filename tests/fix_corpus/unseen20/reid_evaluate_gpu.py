"""Re-identification retrieval metrics from layumi/Person_reID_baseline_pytorch (`evaluate_gpu.py`: `evaluate`,
`compute_mAP`, stored revision 092985c). `evaluate` scores the gallery against one query with `torch.mm`, moves the
scores to NumPy (`.cpu()`, `.numpy()`), ranks them with `np.argsort`, finds good and junk gallery entries with
`np.argwhere`/`np.setdiff1d`/`np.intersect1d`/`np.append`, and `compute_mAP` builds a `torch.IntTensor` CMC curve,
branches on `good_index.size==0`, masks the ranking with NumPy membership tests, writes `cmc[rows_good[0]:] = 1`
with a NumPy index, and averages precision in a Python loop over the good matches.

Adaptations: the script part of the file (loading `pytorch_result.mat` with `scipy.io.loadmat`, `.cuda()`, and the
module-level loop over queries that sums the CMC curves and prints top-1/5/10 and mAP) is left out; the features and
the label/camera arrays are random and made in the factory in the shapes that loop passes (one query feature, its
label and camera as NumPy scalars, the gallery features, the gallery label and camera arrays, with some `-1` junk
labels). `np.in1d` (removed in NumPy 2.4, installed here: 2.4.6) is written `np.isin` (same results for 1-D
arrays); nothing else is changed. Two calls: two queries against two galleries.
"""
import numpy as np
import torch


#######################################################################
# Evaluate
def evaluate(qf,ql,qc,gf,gl,gc):
    query = qf.view(-1,1)
    # print(query.shape)
    score = torch.mm(gf,query)
    score = score.squeeze(1).cpu()
    score = score.numpy()
    # predict index
    index = np.argsort(score)  #from small to large
    index = index[::-1]
    # index = index[0:2000]
    # good index
    query_index = np.argwhere(gl==ql)  # BREAK
    camera_index = np.argwhere(gc==qc)  # BREAK

    good_index = np.setdiff1d(query_index, camera_index, assume_unique=True)  # BREAK
    junk_index1 = np.argwhere(gl==-1)  # BREAK
    junk_index2 = np.intersect1d(query_index, camera_index)  # BREAK
    junk_index = np.append(junk_index2, junk_index1) #.flatten())
    
    CMC_tmp = compute_mAP(index, good_index, junk_index)
    return CMC_tmp


def compute_mAP(index, good_index, junk_index):
    ap = 0
    cmc = torch.IntTensor(len(index)).zero_()
    if good_index.size==0:   # if empty
        cmc[0] = -1
        return ap,cmc

    # remove junk_index
    mask = np.isin(index, junk_index, invert=True)  # BREAK
    index = index[mask]  # BREAK

    # find good_index index
    ngood = len(good_index)
    mask = np.isin(index, good_index)  # BREAK
    rows_good = np.argwhere(mask==True)  # BREAK
    rows_good = rows_good.flatten()
    
    cmc[rows_good[0]:] = 1  # BREAK
    for i in range(ngood):
        d_recall = 1.0/ngood
        precision = (i+1)*1.0/(rows_good[i]+1)
        if rows_good[i]!=0:
            old_precision = i*1.0/rows_good[i]
        else:
            old_precision=1.0
        ap = ap + d_recall*(old_precision + precision)/2

    return ap, cmc


def target():
    torch.manual_seed(0)
    rng = np.random.RandomState(0)

    def gallery(n, n_ids):
        gf = torch.nn.functional.normalize(torch.randn(n, 32), dim=1)
        gl = rng.randint(0, n_ids, size=n)
        gl[rng.rand(n) < 0.1] = -1
        gc = rng.randint(1, 7, size=n)
        return gf, gl, gc

    gf1, gl1, gc1 = gallery(60, 8)
    gf2, gl2, gc2 = gallery(90, 12)
    qf1 = torch.nn.functional.normalize(gf1[3] + 0.3 * torch.randn(32), dim=0)
    qf2 = torch.nn.functional.normalize(gf2[10] + 0.3 * torch.randn(32), dim=0)
    ql1, qc1 = gl1[3] if gl1[3] != -1 else np.int64(2), np.int64(7)
    ql2, qc2 = gl2[10] if gl2[10] != -1 else np.int64(5), np.int64(7)
    return [
        (evaluate, (qf1, ql1, qc1, gf1, gl1, gc1), {}),
        (evaluate, (qf2, ql2, qc2, gf2, gl2, gc2), {}),
    ]


EXPECT = ("none: the ranking and the CMC/mAP computation are NumPy set operations and a Python precision loop "
          "over a host copy of the scores; only torch.mm is tensor work, so the function should stay eager")
