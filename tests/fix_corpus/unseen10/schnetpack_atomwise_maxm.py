"""SchNet energy prediction over a batch of molecules (atomistic-machine-learning/schnetpack, 2.x:
`src/schnetpack/representation/schnet.py`: `SchNetInteraction`, `SchNet`; `src/schnetpack/atomistic/atomwise.py`:
`Atomwise`; `src/schnetpack/atomistic/distances.py`: `PairwiseDistances`; `src/schnetpack/nn/scatter.py`:
`scatter_add`; `src/schnetpack/nn/radial.py`: `gaussian_rbf`, `GaussianRBF`; `nn/cutoff.py`: `cosine_cutoff`,
`CosineCutoff`; `nn/base.py`: `Dense`; `nn/activations.py`: `shifted_softplus`). Messages are gathered with
`x[idx_j]`, filtered by a radial-basis filter network times the cosine cutoff, and summed per centre atom with
`scatter_add(x_ij, idx_i, dim_size=x.shape[0])`; `Atomwise` divides by `n_atoms` in `avg` mode and aggregates per
molecule with `maxm = int(idx_m[-1]) + 1` (a tensor element read as a Python int, sizing `torch.zeros`) and
`index_add`. Inputs travel in a dict keyed by the `schnetpack.properties` names.
Adaptations: `schnetpack.properties` keys are module-level strings; `spk.nn.build_mlp`'s pyramidal output network is
written as two `Dense` layers; `NeuralNetworkPotential` is reduced to its forward (input modules, representation,
output modules, collecting the outputs; no derivatives or postprocessing); the neighbor list (an ASE/matscipy
transform upstream) is built in the factory as all pairs within each molecule; sizes shrunk (16 features, 3
interactions, 10 radial functions, cutoff 5). The two calls use batches of 2 and 3 molecules of different sizes (`sum`
aggregation, the default; the `avg` branch is kept but not taken)."""
import math
from typing import Callable, Dict, Union, Sequence

import torch
from torch import nn
import torch.nn.functional as F

# adaptation: schnetpack.properties keys
Z = "_atomic_numbers"
R = "_positions"
offsets = "_offsets"
idx_m = "_idx_m"
idx_i = "_idx_i"
idx_j = "_idx_j"
Rij = "_Rij"
n_atoms = "_n_atoms"


def shifted_softplus(x: torch.Tensor):
    return F.softplus(x) - math.log(2.0)


class Dense(nn.Linear):
    def __init__(self, in_features: int, out_features: int, bias: bool = True, activation: Union[Callable, nn.Module] = None):
        super(Dense, self).__init__(in_features, out_features, bias)
        self.activation = activation
        if self.activation is None:
            self.activation = nn.Identity()

    def forward(self, input: torch.Tensor):
        y = F.linear(input, self.weight, self.bias)
        y = self.activation(y)
        return y


def scatter_add(
    x: torch.Tensor, idx_i: torch.Tensor, dim_size: int, dim: int = 0
) -> torch.Tensor:
    shape = list(x.shape)
    shape[dim] = dim_size
    tmp = torch.zeros(shape, dtype=x.dtype, device=x.device)
    y = tmp.index_add(dim, idx_i, x)
    return y


def gaussian_rbf(inputs: torch.Tensor, offsets: torch.Tensor, widths: torch.Tensor):
    coeff = -0.5 / torch.pow(widths, 2)
    diff = inputs[..., None] - offsets
    y = torch.exp(coeff * torch.pow(diff, 2))
    return y


class GaussianRBF(nn.Module):
    def __init__(
        self, n_rbf: int, cutoff: float, start: float = 0.0, trainable: bool = False
    ):
        super(GaussianRBF, self).__init__()
        self.n_rbf = n_rbf

        # compute offset and width of Gaussian functions
        offset = torch.linspace(start, cutoff, n_rbf)
        widths = torch.FloatTensor(
            torch.abs(offset[1] - offset[0]) * torch.ones_like(offset)
        )
        if trainable:
            self.widths = nn.Parameter(widths)
            self.offsets = nn.Parameter(offset)
        else:
            self.register_buffer("widths", widths)
            self.register_buffer("offsets", offset)

    def forward(self, inputs: torch.Tensor):
        return gaussian_rbf(inputs, self.offsets, self.widths)


def cosine_cutoff(input: torch.Tensor, cutoff: torch.Tensor):
    # Compute values of cutoff function
    input_cut = 0.5 * (torch.cos(input * math.pi / cutoff) + 1.0)
    # Remove contributions beyond the cutoff radius
    input_cut *= (input < cutoff).float()
    return input_cut


class CosineCutoff(nn.Module):
    def __init__(self, cutoff: float):
        super(CosineCutoff, self).__init__()
        self.register_buffer("cutoff", torch.FloatTensor([cutoff]))

    def forward(self, input: torch.Tensor):
        return cosine_cutoff(input, self.cutoff)


class PairwiseDistances(nn.Module):
    def forward(self, inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        R_ = inputs[R]
        offsets_ = inputs[offsets]
        idx_i_ = inputs[idx_i]
        idx_j_ = inputs[idx_j]

        Rij_ = R_[idx_j_] - R_[idx_i_] + offsets_
        inputs[Rij] = Rij_
        return inputs


class SchNetInteraction(nn.Module):
    def __init__(
        self,
        n_atom_basis: int,
        n_rbf: int,
        n_filters: int,
        activation: Callable = shifted_softplus,
    ):
        super(SchNetInteraction, self).__init__()
        self.in2f = Dense(n_atom_basis, n_filters, bias=False, activation=None)
        self.f2out = nn.Sequential(
            Dense(n_filters, n_atom_basis, activation=activation),
            Dense(n_atom_basis, n_atom_basis, activation=None),
        )
        self.filter_network = nn.Sequential(
            Dense(n_rbf, n_filters, activation=activation),
            Dense(n_filters, n_filters),
        )

    def forward(
        self,
        x: torch.Tensor,
        f_ij: torch.Tensor,
        idx_i: torch.Tensor,
        idx_j: torch.Tensor,
        rcut_ij: torch.Tensor,
    ):
        x = self.in2f(x)
        Wij = self.filter_network(f_ij)
        Wij = Wij * rcut_ij[:, None]

        # continuous-filter convolution
        x_j = x[idx_j]
        x_ij = x_j * Wij
        x = scatter_add(x_ij, idx_i, dim_size=x.shape[0])

        x = self.f2out(x)
        return x


class SchNet(nn.Module):
    def __init__(
        self,
        n_atom_basis: int,
        n_interactions: int,
        radial_basis: nn.Module,
        cutoff_fn: Callable,
        n_filters: int = None,
        shared_interactions: bool = False,
        max_z: int = 100,
        activation: Callable = shifted_softplus,
    ):
        super().__init__()
        self.n_atom_basis = n_atom_basis
        self.size = (self.n_atom_basis,)
        self.n_filters = n_filters or self.n_atom_basis
        self.radial_basis = radial_basis
        self.cutoff_fn = cutoff_fn

        # layers
        self.embedding = nn.Embedding(max_z, self.n_atom_basis, padding_idx=0)

        if shared_interactions:
            # use the same SchNetInteraction instance (hence the same weights)
            self.interactions = nn.ModuleList(
                [
                    SchNetInteraction(
                        n_atom_basis=self.n_atom_basis,
                        n_rbf=self.radial_basis.n_rbf,
                        n_filters=self.n_filters,
                        activation=activation,
                    )
                ]
                * n_interactions
            )
        else:
            # use one SchNetInteraction instance for each interaction
            self.interactions = nn.ModuleList(
                [
                    SchNetInteraction(
                        n_atom_basis=self.n_atom_basis,
                        n_rbf=self.radial_basis.n_rbf,
                        n_filters=self.n_filters,
                        activation=activation,
                    )
                    for _ in range(n_interactions)
                ]
            )

    def forward(self, inputs: Dict[str, torch.Tensor]):

        atomic_numbers = inputs[Z]
        r_ij = inputs[Rij]
        idx_i_ = inputs[idx_i]
        idx_j_ = inputs[idx_j]

        # compute atom and pair features
        x = self.embedding(atomic_numbers)
        d_ij = torch.norm(r_ij, dim=1)
        f_ij = self.radial_basis(d_ij)
        rcut_ij = self.cutoff_fn(d_ij)

        # compute interaction block to update atomic embeddings
        for interaction in self.interactions:
            v = interaction(x, f_ij, idx_i_, idx_j_, rcut_ij)
            x = x + v

        return {"scalar_representation": x}


class Atomwise(nn.Module):
    def __init__(
        self,
        output: str,
        n_in: int,
        n_out: int = 1,
        aggregation_mode: str = "sum",
        custom_outnet: Callable = None,
        outnet_input: Union[str, Sequence[str]] = "scalar_representation",
    ):
        super(Atomwise, self).__init__()
        self.output = output
        self.n_out = n_out

        # build output network (adaptation: build_mlp's pyramid, two layers)
        self.outnet = custom_outnet or nn.Sequential(
            Dense(n_in, n_in // 2, activation=shifted_softplus), Dense(n_in // 2, n_out)
        )
        self.outnet_input = outnet_input

        self.aggregation_mode = aggregation_mode

    def forward(self, inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        # predict atomwise contributions
        yi = self.outnet(inputs[self.outnet_input])

        if self.aggregation_mode == "avg":
            yi = yi / inputs[n_atoms][:, None]

        # aggregate
        idx_m_ = inputs[idx_m]
        maxm = int(idx_m_[-1]) + 1  # BREAK
        tmp = torch.zeros((maxm, self.n_out), dtype=yi.dtype, device=yi.device)
        y = tmp.index_add(0, idx_m_, yi)
        y = torch.squeeze(y, -1)

        return {self.output: y}


class NeuralNetworkPotential(nn.Module):
    """Adaptation: schnetpack.model.NeuralNetworkPotential's forward without derivatives/postprocessing."""

    def __init__(self, representation, input_modules, output_modules):
        super().__init__()
        self.representation = representation
        self.input_modules = nn.ModuleList(input_modules)
        self.output_modules = nn.ModuleList(output_modules)
        self.model_outputs = [m.output for m in output_modules]

    def forward(self, inputs: Dict[str, torch.Tensor]):
        for m in self.input_modules:
            inputs = m(inputs)
        inputs.update(self.representation(inputs))
        for m in self.output_modules:
            inputs.update(m(inputs))
        return {k: inputs[k] for k in self.model_outputs}  # BREAK


def predict(model, batch):
    return model(dict(batch))


def _batch(sizes, gen):
    zs, rs, im, ii, jj = [], [], [], [], []
    start = 0
    for m, n in enumerate(sizes):
        zs.append(torch.randint(1, 10, (n,), generator=gen))
        rs.append(2.0 * torch.randn(n, 3, generator=gen))
        im.append(torch.full((n,), m, dtype=torch.long))
        for a in range(n):
            for b in range(n):
                if a != b:
                    ii.append(start + a)
                    jj.append(start + b)
        start += n
    return {
        Z: torch.cat(zs), R: torch.cat(rs), idx_m: torch.cat(im),
        idx_i: torch.tensor(ii), idx_j: torch.tensor(jj), offsets: torch.zeros(len(ii), 3),
        n_atoms: torch.tensor(sizes, dtype=torch.float32),
    }


def target():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    cutoff = 5.0
    rep = SchNet(n_atom_basis=16, n_interactions=3, radial_basis=GaussianRBF(n_rbf=10, cutoff=cutoff),
                 cutoff_fn=CosineCutoff(cutoff))
    model_sum = NeuralNetworkPotential(rep, [PairwiseDistances()], [Atomwise("energy", n_in=16)])
    model_sum.eval()
    return [
        (predict, (model_sum, _batch([4, 6], gen)), {}),
        (predict, (model_sum, _batch([3, 5, 4], gen)), {}),
    ]


EXPECT = ("config: `maxm = int(idx_m[-1]) + 1` reads a tensor element as a Python int to size the per-molecule "
          "output; with `capture_scalar_outputs` it is an unbacked int (or the caller passes the molecule count); "
          "the message passing itself (gather, `index_add`) traces")
