"""DurIAN's alignment module from ivanvovk/durian-pytorch (`model/alignment.py` `AlignmentModule`, stored revision
3a78b46). `forward` sums the hard alignment matrix into per-token durations, expands the encoder states with `bmm`,
and builds the relative position encoding in a Python loop over the batch: for each object it concatenates
`torch.linspace(0, 1, steps=int(dur))` over `for dur in durations[obj_idx]` (iterating a tensor and casting each
element with `int`), and writes the result into a slice whose length is `positions.shape[0]`; `inference` calls
`forward` by keywords.
Adaptations: `BaseModule` (`model/base.py`, not read) is a stand-in `nn.Module` subclass with nothing added; the
relative import becomes a module-level class. Inputs are made in the factory: encoder states and hard alignments
built from random integer durations (each token 1..4 frames, padded to a common number of frames). The module has
no parameters and draws nothing."""
import torch


class BaseModule(torch.nn.Module):
    """Stand-in for durian's model/base.py BaseModule (not read)."""
    def __init__(self):
        super(BaseModule, self).__init__()


# ---- model/alignment.py
class AlignmentModule(BaseModule):
    """
    Special module in DurIAN, which duplicates encoder hidden states
    with the correspodence to the outputs of duration model.
    """
    def __init__(self):
        super(AlignmentModule, self).__init__()
        
    def forward(self, encoded_inputs, alignments):
        durations = alignments.sum(dim=2)
        alignments = alignments.transpose(2, 1)
        outputs = alignments.bmm(encoded_inputs)
        B, max_target_len = encoded_inputs.shape[0], alignments.shape[1]
        position_encodings = torch.zeros(B, max_target_len, dtype=torch.float32).to(encoded_inputs)
        for obj_idx in range(B):
            positions = torch.cat([torch.linspace(0, 1, steps=int(dur), dtype=torch.float32)  # BREAK
                                   for dur in durations[obj_idx]]).to(encoded_inputs)
            position_encodings[obj_idx, :positions.shape[0]] = positions
        outputs = torch.cat([outputs, position_encodings.unsqueeze(dim=2)], dim=2)
        return outputs
    
    def inference(self, encoded_inputs, alignments):
        return self.forward(encoded_inputs=encoded_inputs, alignments=alignments)


def target():
    torch.manual_seed(0)
    module = AlignmentModule()

    def make(B, L, D):
        durs = torch.randint(1, 5, (B, L))
        T = int(durs.sum(dim=1).max())
        align = torch.zeros(B, L, T)
        for b in range(B):
            t = 0
            for l in range(L):
                d = int(durs[b, l])
                align[b, l, t:t + d] = 1.0
                t += d
        return torch.randn(B, L, D), align

    enc1, al1 = make(2, 5, 6)
    enc2, al2 = make(3, 4, 6)
    return [
        (module, (enc1, al1), {}),
        (AlignmentModule.inference, (module, enc2, al2), {}),
    ]


EXPECT = ("none: the position encoding needs one `linspace` per token whose length is a tensor value "
          "(`int(dur)` while iterating `durations[obj_idx]`), so the output shapes depend on data; a rewrite would "
          "need a vectorised cumulative-position formula that changes the code's structure, not a local fix")
