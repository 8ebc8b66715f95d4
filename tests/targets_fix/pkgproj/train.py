"""The user's own script: graphstitch never imports it; `graphstitch run train.py` runs it."""
import torch
from mypkg import TinyClassifier

torch.manual_seed(0)
model = torch.compile(TinyClassifier().eval())
with torch.no_grad():
    for _ in range(3):
        model(torch.randn(4, 16))
