"""Counter-based random streams (docs/training.md).

Every random number is a hash of ``(model key, step, stream, position)``, so

* the private Poisson stream (A), the noise stream, and the public batch stream (B) are independent by
  construction — changing one stream's draws cannot move another's;
* model k's randomness does not depend on which other models share its batch, so a model trained
  inside a batch of R models equals the same model trained alone;
* all models' draws are produced by one vectorised computation, with no Python loop over models (but for
  the generator blocks of a large model's Gaussian noise, below).

The hash is a chain of 32-bit "lowbias32" finalisers (a bijection on 32-bit words with full avalanche),
evaluated on int32 words with arithmetic modulo 2^32, from a 64-bit base per (model key, step, stream);
two words make one 53-bit uniform double. Gaussian draws are Box–Muller transforms of such uniforms for
the first few thousand per model (the noise of a small model, vectorised over models) and torch generators
seeded from the hash beyond that (a large model's noise, where hashing millions of words per step would
dominate the step).
"""

from __future__ import annotations

import functools
import math
from enum import IntEnum

import torch

_MASK32 = 0xFFFFFFFF
HASHED_NORMALS = 4096  # a model's first normals of a request, hashed (Box–Muller), vectorised over models
NORMAL_BLOCK = 16384  # normals per seeded-generator block beyond those
POISSON_WIDTH_SIGMAS = 4.0  # gaps drawn at first, beyond the expected batch size, in standard deviations


class Stream(IntEnum):
    """Stream identifiers; a new purpose gets a new number, never a reused one."""

    PRIVATE_SAMPLE = 1  # stream A: Poisson sampling of the private batch
    NOISE = 2  # Gaussian noise added to the clipped private sum
    PUBLIC_SAMPLE = 3  # stream B: the public batch
    PUBLIC_PAD = 4  # random padding of protected columns in gaussian_pad public losses
    INIT = 5  # parameter initialisation
    PRIVATE_PAD = 6  # padding used inside ℓ_priv = ℓ - ℓ_pub∘Ψ on the private batch
    GAME = 7  # audit games: the hidden bit or secret value of each trial


def _as_words(x: torch.Tensor) -> torch.Tensor:
    """The low 32 bits of an integer tensor as int32 words (two's complement bit patterns)."""
    return (((x.to(torch.int64) + (1 << 31)) & _MASK32) - (1 << 31)).to(torch.int32)


def _as_unsigned(words: torch.Tensor) -> torch.Tensor:
    """int32 words as the values in [0, 2^32) they stand for, in int64."""
    return words.to(torch.int64) & _MASK32


def _constant(value: int) -> torch.Tensor:
    """A 0-dim int32 word: int32 tensors combine with it in int32 kernels, about twice as fast as with a
    Python integer (B2 profile), and a CPU 0-dim tensor serves as a scalar on any device."""
    return _as_words(torch.tensor(value))


_SHIFT_16, _LOW_16, _SHIFT_15, _LOW_17 = (_constant(c) for c in (16, 0xFFFF, 15, 0x1FFFF))
_MULTIPLIERS = tuple(_constant(c) for c in (0x7FEB352D, 0x846CA68B))
_SHIFT_5, _LOW_27, _SHIFT_6, _LOW_26 = (_constant(c) for c in (5, 0x7FFFFFF, 6, 0x3FFFFFF))
_HIGH_SALT = _constant(0x63D83595)
_SEED_SALT = _constant(0x2545F491)
_INDEX_SALTS = tuple(_constant(c) for c in (0x9E3779B9, 0x5851F42D))


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 finaliser on int32 words (a fresh tensor). The arithmetic is modulo 2^32: products and
    sums wrap, and a logical right shift is the arithmetic one with the sign-extended bits masked off.
    int32 words move half the bytes of int64 ones, which is what a pass over hundreds of thousands of
    words per step costs (B2 profile); a known-answer test pins the bits to the reference definition."""
    x = x ^ ((x >> _SHIFT_16) & _LOW_16)
    x.mul_(_MULTIPLIERS[0])
    x.bitwise_xor_((x >> _SHIFT_15) & _LOW_17)
    x.mul_(_MULTIPLIERS[1])
    return x.bitwise_xor_((x >> _SHIFT_16) & _LOW_16)


def model_keys(seed: int, model_indices: torch.Tensor | range | list[int]) -> torch.Tensor:
    """One 64-bit key per model, a function of (seed, model index) only, as two int32 words ``[R, 2]``:

    ``k₁ = mix(mix(mix(s₁) ⊕ s₂) ⊕ mix(i₁ ⊕ 0x9E3779B9) ⊕ i₂)``,
    ``k₂ = mix(mix(mix(s₂ ⊕ 0x2545F491) ⊕ s₁) ⊕ mix(i₁ ⊕ 0x5851F42D) ⊕ i₂)``

    for the seed's words ``(s₁, s₂)`` and the index's ``(i₁, i₂)`` (low word first). For one seed each word is
    a bijection of the index's low word, so no two models of an audit share either word; models of two seeds
    (an audit's trials and its shadow models) share a key with probability about 2^-64 per pair.

    Args:
        seed: the audit's seed (64 bits are used).
        model_indices: the models' indices, ``R`` of them.

    Returns:
        The keys ``[R, 2]``, int32 words.
    """
    index = torch.as_tensor(list(model_indices) if isinstance(model_indices, range) else model_indices,
                            dtype=torch.int64)
    seed_low = _as_words(torch.full_like(index, seed & _MASK32))
    seed_high = _as_words(torch.full_like(index, (seed >> 32) & _MASK32))
    index_low, index_high = _as_words(index), _as_words(index >> 32)
    first = _mix32(_mix32(_mix32(seed_low) ^ seed_high) ^ _mix32(index_low ^ _INDEX_SALTS[0]) ^ index_high)
    second = _mix32(_mix32(_mix32(seed_high ^ _SEED_SALT) ^ seed_low) ^ _mix32(index_low ^ _INDEX_SALTS[1])
                    ^ index_high)
    return torch.stack([first, second], dim=1)


@functools.lru_cache(maxsize=1 << 16)
def _salts(step: int, stream: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``mix(step)``, ``mix(step ⊕ 0xA511E9B3)`` and ``stream·0x68E31DA4`` as int32 values: the parts of every
    model's base words that depend on (step, stream) only, computed once (a single model's step is a few
    dozen tiny operations, so each one saved counts in the sequential loop of B2)."""
    return _mix32(_constant(step)), _mix32(_constant(step ^ 0xA511E9B3)), _constant(stream * 0x68E31DA4)


def _bases(keys: torch.Tensor, step: int, stream: Stream, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The 64-bit base of each model's draw sequence at (step, stream), as two int32 words
    ``b₁ = mix(mix(k₁ ⊕ mix(step)) ⊕ s)`` and ``b₂ = mix(mix(k₂ ⊕ mix(step ⊕ 0xA511E9B3)) ⊕ s ⊕ 0x63D83595)``
    for the key ``(k₁, k₂)`` and ``s = stream·0x68E31DA4``. At one (step, stream), ``b₁`` is a bijection of
    ``k₁``: the models of one seed never share a base. Other (key, step, stream) triples share a draw sequence
    only if both words coincide: about 2^-64 per pair, where a single 32-bit base would let a few thousand of
    the millions of triples of a large audit coincide."""
    low_step, high_step, stream_salt = _salts(step, int(stream))
    keys = keys.to(device)
    low = _mix32(_mix32(keys[:, 0] ^ low_step) ^ stream_salt)
    return low, _mix32(_mix32(keys[:, 1] ^ high_step) ^ stream_salt ^ _HIGH_SALT)


def _words(keys: torch.Tensor, step: int, stream: Stream, count: int, device: torch.device) -> torch.Tensor:
    """``[R, count]`` independent 32-bit words (int32 bit patterns) for each model key:
    ``mix(mix(position ⊕ b₁) + b₂)`` for the base ``(b₁, b₂)`` of :func:`_bases`."""
    low, high = _bases(keys, step, stream, device)
    position = torch.arange(count, dtype=torch.int32, device=device)
    return _mix32(_mix32(position[None, :] ^ low[:, None]).add_(high[:, None]))


def _uniforms(words: torch.Tensor) -> torch.Tensor:
    """Pairs of consecutive words as float64 uniforms in the open interval (0, 1), 53 random bits each."""
    hi, lo = (words[:, 0::2] >> _SHIFT_5) & _LOW_27, (words[:, 1::2] >> _SHIFT_6) & _LOW_26  # 27 + 26 bits
    # hi·2^26 + lo is an integer below 2^53 and 2^-53 a power of two: every step but the + 0.5 is exact.
    return hi.to(torch.float64).mul_(67108864.0).add_(lo).add_(0.5).mul_(2.0**-53)


def uniform(keys: torch.Tensor, step: int, stream: Stream, count: int,
            device: torch.device | str = "cpu") -> torch.Tensor:
    """``[R, count]`` float64 uniforms in the open interval (0, 1), 53 random bits each.

    Args:
        keys: model keys ``[R, 2]`` (:func:`model_keys`).
        step: the training step (or another counter) the draws belong to.
        stream: the stream they are drawn from.
        count: draws per model.
        device: where the draws are made.

    Returns:
        The uniforms ``[R, count]``; draw j of model r depends only on (key r, step, stream, j).
    """
    return _uniforms(_words(keys, step, stream, 2 * count, torch.device(device)))


def normal(keys: torch.Tensor, step: int, stream: Stream, count: int,
           device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[R, count]`` standard normals. Draw j of model r depends only on (key r, step, stream, j), so a
    shorter request is a prefix of a longer one (the engine asks for padding noise over batches whose
    width depends on the other models of a chunk).

    The first :data:`HASHED_NORMALS` draws are Box–Muller transforms of hashed uniforms, vectorised over
    models (a small model's noise costs a few passes, not a Python loop over models). Each further block
    of :data:`NORMAL_BLOCK` draws comes from a torch generator seeded by the hash of (key, step, stream,
    block) — hashing millions of words per step would cost more than drawing them — and is always drawn
    whole, since torch's own chunking makes ``randn(m)`` no prefix of ``randn(m')``. Those blocks come from the
    device's generator (Philox on CUDA, the Mersenne Twister on the CPU): a model with more parameters than
    :data:`HASHED_NORMALS` gets other (equally distributed) initial weights and noise on a GPU than on the CPU,
    so its results are reproducible on the same kind of device, not across kinds; drawing them on the CPU
    would make a GPU wait on the CPU for every step's noise.

    Args:
        keys: model keys ``[R, 2]`` (:func:`model_keys`).
        step: the training step the draws belong to.
        stream: the stream they are drawn from.
        count: draws per model.
        device: where the draws are made.
        dtype: the floating type of the draws.

    Returns:
        The normals ``[R, count]``.
    """
    device = torch.device(device)
    r = keys.shape[0]
    head = min(count, HASHED_NORMALS)
    blocks = -(-(count - head) // NORMAL_BLOCK)
    pairs = -(-head // 2)
    words = _words(keys, step, stream, 2 * HASHED_NORMALS + 2 * blocks if blocks else 4 * pairs, device)
    u = _uniforms(words[:, :4 * pairs])
    radius, angle = torch.log(u[:, 0::2]).mul_(-2.0).sqrt_(), u[:, 1::2].mul(2.0 * math.pi)
    # Draw 2i is r_i cos θ_i and draw 2i + 1 is r_i sin θ_i (torch.polar would be 3x slower on a CPU).
    draws = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=2).reshape(r, 2 * pairs)
    if not blocks:
        return draws[:, :count].to(dtype)
    out = torch.empty(r, count, device=device, dtype=dtype)
    out[:, :head] = draws[:, :head]
    seeds = _as_unsigned(words[:, 2 * HASHED_NORMALS:]).tolist()
    generator = torch.Generator(device=device)
    block = torch.empty(NORMAL_BLOCK, device=device, dtype=dtype)
    for model, model_seeds in enumerate(seeds):
        for b in range(blocks):
            generator.manual_seed((model_seeds[2 * b] << 32) | model_seeds[2 * b + 1])
            torch.randn(NORMAL_BLOCK, generator=generator, device=device, dtype=dtype, out=block)
            start = HASHED_NORMALS + b * NORMAL_BLOCK
            stop = min(start + NORMAL_BLOCK, count)
            out[model, start:stop] = block[:stop - start]
    return out


def poisson_sample(keys: torch.Tensor, step: int, n: int, rate: float,
                   device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Poisson sampling of ``n`` records at ``rate`` for each model: every record is included
    independently with probability ``rate`` (stream A).

    Exact and O(R·rate·n): the gaps between included records are i.i.d. Geometric(rate), drawn by inversion,
    gap j from uniform j of stream A; if the first draw of gaps does not reach the end of the data set for some
    model (a binomial count beyond :data:`POISSON_WIDTH_SIGMAS` standard deviations: probability below 1e-4),
    more gaps are drawn at the next positions. The width costs time only: the sample is the same for any width.

    Args:
        keys: model keys ``[R, 2]`` (:func:`model_keys`).
        step: the training step.
        n: the number of records.
        rate: the inclusion probability in (0, 1]; 1 includes every record.
        device: where the sample is made.

    Returns:
        ``(indices, valid)``, both ``[R, K]``: the included record indices in increasing order, padded to a
        common width K (the largest sample), and which entries are real.
    """
    device = torch.device(device)
    r = keys.shape[0]
    if rate >= 1.0:
        indices = torch.arange(n, device=device).expand(r, n)
        return indices, torch.ones(r, n, dtype=torch.bool, device=device)
    mean = n * rate
    width = int(mean + POISSON_WIDTH_SIGMAS * math.sqrt(mean * (1.0 - rate)) + 16)
    log_q = math.log1p(-rate)
    chunks, offset, last = [], 0, torch.full((r,), -1, dtype=torch.float64, device=device)
    while True:
        u = uniform(keys, step, Stream.PRIVATE_SAMPLE, offset + width, device)[:, offset:]
        gaps = torch.log(u).div_(log_q).floor_().add_(1.0)
        positions = torch.cumsum(gaps, dim=1).add_(last[:, None])
        chunks.append(positions)
        last = positions[:, -1]
        offset += width
        if bool((last >= n).all()):
            break
    positions = chunks[0] if len(chunks) == 1 else torch.cat(chunks, dim=1)
    valid = positions < n
    k = int(valid.sum(dim=1).max()) if r else 0
    positions, valid = positions[:, :k], valid[:, :k]
    return torch.where(valid, positions, 0.0).to(torch.int64), valid


def uniform_indices(keys: torch.Tensor, step: int, stream: Stream, count: int, population: torch.Tensor,
                    device: torch.device | str = "cpu") -> torch.Tensor:
    """``[R, count]`` indices drawn uniformly with replacement from ``range(population[r])`` (stream B).

    Args:
        keys: model keys ``[R, 2]`` (:func:`model_keys`).
        step: the training step.
        stream: the stream the draws come from.
        count: indices per model.
        population: each model's population size ``[R]`` (positive).
        device: where the indices are made.

    Returns:
        int64 indices ``[R, count]``, row r in ``[0, population[r])``.
    """
    u = uniform(keys, step, stream, count, device)
    sizes = population.to(device=u.device, dtype=torch.float64)[:, None]
    return torch.minimum(torch.floor(u * sizes), sizes - 1).to(torch.int64)
