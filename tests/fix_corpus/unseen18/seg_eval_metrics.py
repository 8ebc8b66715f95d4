"""Segmentation metrics of LeeJunHyun/Image_Segmentation (`evaluation.py`: `get_accuracy`, `get_sensitivity`,
`get_specificity`, `get_precision`, `get_F1`, `get_JS`, `get_DC`, the whole file of the stored revision).
Each metric thresholds the network output (`SR > threshold`), binarises the ground truth against its maximum
(`GT == torch.max(GT)`), counts with `torch.sum` of boolean masks and returns a Python float through
`float(torch.sum(...))` divisions; `get_F1` combines two of them in Python arithmetic. `solver.py`'s training,
validation and test loops call them on every batch (`acc += get_accuracy(SR,GT)`, ...).
Adaptations: `solver.py` itself is not used (it builds a U-Net from `network.py`, reads image folders and writes
checkpoints and a CSV file); the calls are the original metric functions, called as `solver.py` calls them,
on `SR` (raw U-Net outputs, here random `[B, 1, H, W]` tensors made in the factory) and `GT` (binary masks).
Four calls: `get_F1` (with its nested `get_sensitivity`/`get_precision`), `get_JS`, `get_DC` and `get_accuracy`
with a different threshold, on two batches. No randomness in the calls; they change nothing."""
import torch

# SR : Segmentation Result
# GT : Ground Truth

def get_accuracy(SR,GT,threshold=0.5):
    SR = SR > threshold
    GT = GT == torch.max(GT)
    corr = torch.sum(SR==GT)
    tensor_size = SR.size(0)*SR.size(1)*SR.size(2)*SR.size(3)
    acc = float(corr)/float(tensor_size)  # BREAK

    return acc

def get_sensitivity(SR,GT,threshold=0.5):
    # Sensitivity == Recall
    SR = SR > threshold
    GT = GT == torch.max(GT)

    # TP : True Positive
    # FN : False Negative
    TP = (SR==1)&(GT==1)
    FN = (SR==0)&(GT==1)

    SE = float(torch.sum(TP))/(float(torch.sum(TP+FN)) + 1e-6)       # BREAK
    
    return SE

def get_specificity(SR,GT,threshold=0.5):
    SR = SR > threshold
    GT = GT == torch.max(GT)

    # TN : True Negative
    # FP : False Positive
    TN = (SR==0)&(GT==0)
    FP = (SR==1)&(GT==0)

    SP = float(torch.sum(TN))/(float(torch.sum(TN+FP)) + 1e-6)
    
    return SP

def get_precision(SR,GT,threshold=0.5):
    SR = SR > threshold
    GT = GT == torch.max(GT)

    # TP : True Positive
    # FP : False Positive
    TP = (SR==1)&(GT==1)
    FP = (SR==1)&(GT==0)

    PC = float(torch.sum(TP))/(float(torch.sum(TP+FP)) + 1e-6)  # BREAK

    return PC

def get_F1(SR,GT,threshold=0.5):
    # Sensitivity == Recall
    SE = get_sensitivity(SR,GT,threshold=threshold)
    PC = get_precision(SR,GT,threshold=threshold)

    F1 = 2*SE*PC/(SE+PC + 1e-6)

    return F1

def get_JS(SR,GT,threshold=0.5):
    # JS : Jaccard similarity
    SR = SR > threshold
    GT = GT == torch.max(GT)
    
    Inter = torch.sum(SR&GT)
    Union = torch.sum(SR|GT)
    
    JS = float(Inter)/(float(Union) + 1e-6)  # BREAK
    
    return JS

def get_DC(SR,GT,threshold=0.5):
    # DC : Dice Coefficient
    SR = SR > threshold
    GT = GT == torch.max(GT)

    Inter = torch.sum(SR&GT)
    DC = float(2*Inter)/(float(torch.sum(SR)+torch.sum(GT)) + 1e-6)  # BREAK

    return DC


def target():
    torch.manual_seed(0)
    batches = []
    for b, hw in ((2, 16), (3, 12)):
        GT = (torch.rand(b, 1, hw, hw) > 0.6).float()
        SR = torch.randn(b, 1, hw, hw) + 1.5 * GT
        batches.append((SR, GT))
    (SR1, GT1), (SR2, GT2) = batches
    return [
        (get_F1, (SR1, GT1), {}),
        (get_JS, (SR2, GT2), {}),
        (get_DC, (SR1, GT1), {}),
        (get_accuracy, (SR2, GT2), {'threshold': 0.3}),
    ]


EXPECT = "rewrite"
