"""Counter-based random streams (SPEC 2.3, 6).

Every random number is a hash of ``(model key, step, stream, position)``, so

* the private Poisson stream (A), the noise stream, and the public batch stream (B) are independent by
  construction — changing one stream's draws cannot move another's;
* model k's randomness does not depend on which other models share its batch, so a model trained
  inside a batch of R models equals the same model trained alone;
* all models' draws are produced by one vectorised computation, with no Python loop over models.

The hash is a chain of 32-bit "lowbias32" finalisers (a bijection on 32-bit words with full avalanche),
evaluated in int64 arithmetic with masking; two 32-bit words make one 53-bit uniform double. Gaussian
noise, which needs one draw per parameter, instead seeds a Philox-free torch generator per model from the
hash of (model key, step, stream): hashing hundreds of thousands of words per step would dominate a
training step, and a per-model generator call costs microseconds.
"""

from __future__ import annotations

import math
from enum import IntEnum

import torch

_MASK32 = 0xFFFFFFFF


class Stream(IntEnum):
    """Stream identifiers; a new purpose gets a new number, never a reused one."""

    PRIVATE_SAMPLE = 1  # stream A: Poisson sampling of the private batch
    NOISE = 2  # Gaussian noise added to the clipped private sum
    PUBLIC_SAMPLE = 3  # stream B: the public batch
    PUBLIC_PAD = 4  # random padding of protected columns in gaussian_pad public losses
    INIT = 5  # parameter initialisation
    PRIVATE_PAD = 6  # padding used inside ℓ_priv = ℓ - ℓ_pub∘Ψ on the private batch
    GAME = 7  # audit games: the hidden bit or secret value of each trial


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 finaliser on values in [0, 2^32) held in int64 (in place on a fresh copy)."""
    x = x & _MASK32
    x.bitwise_xor_(x >> 16)
    x.mul_(0x7FEB352D).bitwise_and_(_MASK32)
    x.bitwise_xor_(x >> 15)
    x.mul_(0x846CA68B).bitwise_and_(_MASK32)
    return x.bitwise_xor_(x >> 16)


def model_keys(seed: int, model_indices: torch.Tensor | range | list[int]) -> torch.Tensor:
    """One 32-bit key per model, a function of (seed, model index) only."""
    index = torch.as_tensor(list(model_indices) if isinstance(model_indices, range) else model_indices,
                            dtype=torch.int64)
    lo = torch.full_like(index, seed & _MASK32)
    hi = torch.full_like(index, (seed >> 32) & _MASK32)
    return _mix32(_mix32(_mix32(lo) ^ hi) ^ _mix32(index ^ 0x9E3779B9))


def _words(keys: torch.Tensor, step: int, stream: Stream, count: int, device: torch.device) -> torch.Tensor:
    """``[R, count]`` independent 32-bit words for each model key."""
    keys = keys.to(device=device, dtype=torch.int64)
    base = _mix32(_mix32(keys ^ _mix32(torch.tensor(step & _MASK32, device=device))) ^ int(stream) * 0x68E31DA4)
    position = torch.arange(count, dtype=torch.int64, device=device)
    return _mix32(_mix32(position[None, :] ^ base[:, None]).add_(base[:, None] * 0x1B873593))


def uniform(keys: torch.Tensor, step: int, stream: Stream, count: int,
            device: torch.device | str = "cpu") -> torch.Tensor:
    """``[R, count]`` float64 uniforms in the open interval (0, 1), 53 random bits each."""
    device = torch.device(device)
    words = _words(keys, step, stream, 2 * count, device)
    hi, lo = words[:, 0::2] >> 5, words[:, 1::2] >> 6  # 27 + 26 = 53 bits
    return ((hi * 67108864 + lo).to(torch.float64) + 0.5) / 9007199254740992.0


def normal(keys: torch.Tensor, step: int, stream: Stream, count: int,
           device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[R, count]`` standard normals; model r's draws depend only on (key r, step, stream)."""
    device = torch.device(device)
    seeds = _words(keys, step, stream, 2, torch.device("cpu"))
    generator = torch.Generator(device=device)
    out = torch.empty(keys.shape[0], count, device=device, dtype=dtype)
    for r, (hi, lo) in enumerate(seeds.tolist()):  # one generator call per model: microseconds
        generator.manual_seed((hi << 32) | lo)
        torch.randn(count, generator=generator, device=device, dtype=dtype, out=out[r])
    return out


def poisson_sample(keys: torch.Tensor, step: int, n: int, rate: float,
                   device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Poisson sampling of ``n`` records at ``rate`` for each model: every record is included
    independently with probability ``rate`` (stream A).

    Returns ``(indices, valid)``, both ``[R, K]``: the included record indices in increasing order,
    padded to a common width K, and which entries are real. Exact and O(R·rate·n): the gaps between
    included records are i.i.d. Geometric(rate), drawn by inversion; if the first draw of gaps does not
    reach the end of the data set for some model (probability below 1e-9 by the width chosen), more
    gaps are drawn from the same stream at fresh positions.
    """
    device = torch.device(device)
    r = keys.shape[0]
    if rate >= 1.0:
        indices = torch.arange(n, device=device).expand(r, n)
        return indices, torch.ones(r, n, dtype=torch.bool, device=device)
    mean = n * rate
    width = int(mean + 6.0 * math.sqrt(mean * (1.0 - rate)) + 16)
    log_q = math.log1p(-rate)
    chunks, offset, last = [], 0, torch.full((r,), -1, dtype=torch.float64, device=device)
    while True:
        u = uniform(keys, step, Stream.PRIVATE_SAMPLE, offset + width, device)[:, offset:]
        gaps = torch.floor(torch.log(u) / log_q) + 1.0
        positions = last[:, None] + torch.cumsum(gaps, dim=1)
        chunks.append(positions)
        last = positions[:, -1]
        offset += width
        if bool((last >= n).all()):
            break
    positions = torch.cat(chunks, dim=1)
    valid = positions < n
    k = int(valid.sum(dim=1).max().item()) if valid.any() else 0
    positions, valid = positions[:, :k], valid[:, :k]
    return torch.where(valid, positions, torch.zeros_like(positions)).to(torch.int64), valid


def uniform_indices(keys: torch.Tensor, step: int, stream: Stream, count: int, population: torch.Tensor,
                    device: torch.device | str = "cpu") -> torch.Tensor:
    """``[R, count]`` indices drawn uniformly with replacement from ``range(population[r])`` (stream B)."""
    u = uniform(keys, step, stream, count, device)
    sizes = population.to(device=u.device, dtype=torch.float64)[:, None]
    return torch.minimum(torch.floor(u * sizes), sizes - 1).to(torch.int64)
