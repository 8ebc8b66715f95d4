"""ANI potential energy: the neighbor list keeps the pairs within the cutoff with
`in_cutoff = (distances <= cutoff).nonzero()`, and the per-species networks select their atoms with
`midx = mask.nonzero().flatten()` / `if midx.shape[0] > 0:` (aiqm/torchani 2.x torchani/aev.py:
neighbor_pairs_nopbc, cutoff_cosine, radial_terms, compute_aev, AEVComputer; torchani/nn.py: ANIModel,
SpeciesEnergies). Only the radial part of the AEV is kept (the angular terms and triple_by_molecule are left out),
and the per-species networks are tiny."""
import math
from typing import NamedTuple, Optional, Tuple

import torch
from torch import Tensor


class SpeciesAEV(NamedTuple):
    species: Tensor
    aevs: Tensor


class SpeciesEnergies(NamedTuple):
    species: Tensor
    energies: Tensor


def cutoff_cosine(distances: Tensor, cutoff: float) -> Tensor:
    # assuming all elements in distances are smaller than cutoff
    return 0.5 * torch.cos(distances * (math.pi / cutoff)) + 0.5


def radial_terms(Rcr: float, EtaR: Tensor, ShfR: Tensor, distances: Tensor) -> Tensor:
    """Compute the radial subAEV terms of the center atom given neighbors

    This correspond to equation (3) in the `ANI paper`_. This function just
    compute the terms. The sum in the equation is not computed.
    The input tensor have shape (conformations, atoms, N), where ``N``
    is the number of neighbor atoms within the cutoff radius and output
    tensor should have shape
    (conformations, atoms, ``self.radial_sublength()``)
    """
    distances = distances.view(-1, 1, 1)
    fc = cutoff_cosine(distances, Rcr)
    # Note that in the equation in the paper there is no 0.25
    # coefficient, but in NeuroChem there is such a coefficient.
    # We choose to be consistent with NeuroChem instead of the paper here.
    ret = 0.25 * torch.exp(-EtaR * (distances - ShfR)**2) * fc
    # At this point, ret now has shape
    # (conformations x atoms, ?, ?) where ? depend on constants.
    # We then should flat the last 2 dimensions to view the subAEV as a two
    # dimensional tensor (onnx doesn't support negative indices in flatten)
    return ret.flatten(start_dim=1)


def neighbor_pairs_nopbc(padding_mask: Tensor, coordinates: Tensor, cutoff: float) -> Tensor:
    """Compute pairs of atoms that are neighbors (doesn't use PBC)

    This function bypasses the calculation of shifts and duplication
    of atoms in order to make calculations faster

    Arguments:
        padding_mask (:class:`torch.Tensor`): boolean tensor of shape
            (molecules, atoms) for padding mask. 1 == is padding.
        coordinates (:class:`torch.Tensor`): tensor of shape
            (molecules, atoms, 3) for atom coordinates.
        cutoff (float): the cutoff inside which atoms are considered pairs
    """
    coordinates = coordinates.detach().masked_fill(padding_mask.unsqueeze(-1), math.nan)
    current_device = coordinates.device
    num_atoms = padding_mask.shape[1]
    num_mols = padding_mask.shape[0]
    p12_all = torch.triu_indices(num_atoms, num_atoms, 1, device=current_device)
    p12_all_flattened = p12_all.view(-1)

    pair_coordinates = coordinates.index_select(1, p12_all_flattened).view(num_mols, 2, -1, 3)
    distances = (pair_coordinates[:, 0, ...] - pair_coordinates[:, 1, ...]).norm(2, -1)
    in_cutoff = (distances <= cutoff).nonzero()  # BREAK
    molecule_index, pair_index = in_cutoff.unbind(1)
    molecule_index *= num_atoms
    atom_index12 = p12_all[:, pair_index] + molecule_index
    return atom_index12


def compute_aev(species: Tensor, coordinates: Tensor, constants: Tuple[float, Tensor, Tensor],
                sizes: Tuple[int, int, int], cell_shifts: Optional[Tuple[Tensor, Tensor]]) -> Tensor:
    Rcr, EtaR, ShfR = constants
    num_species, radial_sublength, radial_length = sizes
    num_molecules = species.shape[0]
    num_atoms = species.shape[1]
    coordinates_ = coordinates
    coordinates = coordinates_.flatten(0, 1)

    # PBC calculation is bypassed if there are no shifts
    if cell_shifts is None:
        atom_index12 = neighbor_pairs_nopbc(species == -1, coordinates_, Rcr)
        selected_coordinates = coordinates.index_select(0, atom_index12.view(-1)).view(2, -1, 3)
        vec = selected_coordinates[0] - selected_coordinates[1]
    else:
        raise NotImplementedError("periodic boundary conditions are not part of this program")
    species = species.flatten()
    species12 = species[atom_index12]

    distances = vec.norm(2, -1)

    # compute radial aev
    radial_terms_ = radial_terms(Rcr, EtaR, ShfR, distances)
    radial_aev = radial_terms_.new_zeros((num_molecules * num_atoms * num_species, radial_sublength))
    index12 = atom_index12 * num_species + species12.flip(0)
    radial_aev.index_add_(0, index12[0], radial_terms_)
    radial_aev.index_add_(0, index12[1], radial_terms_)
    radial_aev = radial_aev.reshape(num_molecules, num_atoms, radial_length)
    return radial_aev


class AEVComputer(torch.nn.Module):
    r"""The AEV computer that takes coordinates as input and outputs aevs (radial part)."""

    def __init__(self, Rcr, EtaR, ShfR, num_species):
        super().__init__()
        self.Rcr = Rcr
        self.num_species = num_species

        # convert constant tensors to a ready-to-broadcast shape
        # shape convension (..., EtaR, ShfR)
        self.register_buffer('EtaR', EtaR.view(-1, 1))
        self.register_buffer('ShfR', ShfR.view(1, -1))

        self.radial_sublength = self.EtaR.numel() * self.ShfR.numel()
        self.radial_length = self.num_species * self.radial_sublength
        self.sizes = self.num_species, self.radial_sublength, self.radial_length

    def constants(self):
        return self.Rcr, self.EtaR, self.ShfR

    def forward(self, input_: Tuple[Tensor, Tensor], cell: Optional[Tensor] = None,
                pbc: Optional[Tensor] = None) -> SpeciesAEV:
        species, coordinates = input_
        assert species.dim() == 2
        assert species.shape == coordinates.shape[:-1]
        assert coordinates.shape[-1] == 3

        if cell is None and pbc is None:
            aev = compute_aev(species, coordinates, self.constants(), self.sizes, None)
            return SpeciesAEV(species, aev)
        raise NotImplementedError("periodic boundary conditions are not part of this program")


class ANIModel(torch.nn.ModuleDict):
    """ANI model that compute energies from species and AEVs."""

    @staticmethod
    def ensureOrderedDict(modules):
        from collections import OrderedDict
        if isinstance(modules, OrderedDict):
            return modules
        od = OrderedDict()
        for i, m in enumerate(modules):
            od[str(i)] = m
        return od

    def __init__(self, modules):
        super().__init__(self.ensureOrderedDict(modules))

    def forward(self, species_aev: Tuple[Tensor, Tensor], cell: Optional[Tensor] = None,
                pbc: Optional[Tensor] = None) -> SpeciesEnergies:
        species, aev = species_aev
        assert species.shape == aev.shape[:-1]

        atomic_energies = self._atomic_energies((species, aev))
        # shape of atomic energies is (C, A)
        return SpeciesEnergies(species, torch.sum(atomic_energies, dim=1))

    def _atomic_energies(self, species_aev: Tuple[Tensor, Tensor]) -> Tensor:
        # Obtain the atomic energies associated with a given tensor of AEV's
        species, aev = species_aev
        assert species.shape == aev.shape[:-1]
        species_ = species.flatten()
        aev = aev.flatten(0, 1)

        output = aev.new_zeros(species_.shape)

        for i, m in enumerate(self.values()):
            mask = (species_ == i)
            midx = mask.nonzero().flatten()  # BREAK
            if midx.shape[0] > 0:
                input_ = aev.index_select(0, midx)
                output.masked_scatter_(mask, m(input_).flatten())
        output = output.view_as(species)
        return output


def target():
    torch.manual_seed(0)
    num_species = 2  # H, C
    aev_computer = AEVComputer(Rcr=2.5, EtaR=torch.tensor([4.0, 16.0]),
                               ShfR=torch.linspace(0.8, 2.3, 4), num_species=num_species)
    radial_length = aev_computer.radial_length
    nets = [torch.nn.Sequential(torch.nn.Linear(radial_length, 16), torch.nn.CELU(0.1), torch.nn.Linear(16, 1))
            for _ in range(num_species)]
    model = torch.nn.Sequential(aev_computer, ANIModel(nets))

    species = torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, -1]])  # second molecule padded
    return [
        (model, ((species, torch.randn(2, 5, 3)),), {}),
        (model, ((species, torch.randn(2, 5, 3)),), {}),
    ]


EXPECT = ("rewrite: keep every triu pair and zero the radial terms beyond the cutoff (multiply by the "
          "`distances <= cutoff` mask) instead of `nonzero()`, and in ANIModel run each species network on all "
          "atoms and select with `torch.where(species_ == i, ...)`")
