"""The counter hash of :mod:`fdp_audit.training.streams` against a pure-Python reference, and its Gaussian
draws.

The streams compute the lowbias32 chain on int32 tensors whose products and sums wrap modulo 2^32; this
known-answer test pins every bit to the definition written with Python's unbounded integers, so a platform
whose tensor arithmetic did not wrap (or a later edit of the hash) fails here rather than silently
changing every model's randomness."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from fdp_audit.training import streams

MASK = 0xFFFFFFFF


def _mix(x: int) -> int:
    """lowbias32 (Chris Wellons' hash-prospector constants) on a Python integer."""
    x &= MASK
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK
    return x ^ (x >> 16)


def _key(seed: int, index: int) -> tuple[int, int]:
    s1, s2, i1, i2 = seed & MASK, (seed >> 32) & MASK, index & MASK, (index >> 32) & MASK
    return (_mix(_mix(_mix(s1) ^ s2) ^ _mix(i1 ^ 0x9E3779B9) ^ i2),
            _mix(_mix(_mix(s2 ^ 0x2545F491) ^ s1) ^ _mix(i1 ^ 0x5851F42D) ^ i2))


def _word(key: tuple[int, int], step: int, stream: int, position: int) -> int:
    salt = (stream * 0x68E31DA4) & MASK
    low = _mix(_mix(key[0] ^ _mix(step)) ^ salt)
    high = _mix(_mix(key[1] ^ _mix(step ^ 0xA511E9B3)) ^ salt ^ 0x63D83595)
    return _mix(_mix(position ^ low) + high)


@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3])
def test_model_keys_match_the_reference(seed):
    indices = [0, 1, 2, 1000, 2**31 + 5, 2**35 + 9]
    expected = [list(_key(seed, i)) for i in indices]
    assert streams._as_unsigned(streams.model_keys(seed, indices)).tolist() == expected


@pytest.mark.parametrize("step", [0, 5, (1 << 30) + 2])
def test_words_and_uniforms_match_the_reference(step):
    keys = streams.model_keys(3, range(4))
    count = 9
    for stream in streams.Stream:
        words = streams._as_unsigned(streams._words(keys, step, stream, 2 * count, torch.device("cpu")))
        expected = [[_word(tuple(k), step, int(stream), j) for j in range(2 * count)]
                    for k in streams._as_unsigned(keys).tolist()]
        assert words.tolist() == expected
        uniforms = streams.uniform(keys, step, stream, count)
        reference = [[((row[2 * j] >> 5) * 67108864 + (row[2 * j + 1] >> 6) + 0.5) / 2.0**53 for j in range(count)]
                     for row in expected]
        assert uniforms.tolist() == reference


def test_a_shared_first_base_word_leaves_the_second_apart():
    """At one (step, stream) the first base word is a bijection of the key's first word, itself a bijection of
    the model index for one seed; across 512 models × 512 steps some pairs of (model, step) share the first
    base word (about 8 are expected; the seed is fixed, so the count is deterministic), and none of them shares
    the second (the word sequence is then different: mix(mix(j ⊕ b₁) + b₂) is injective in b₂)."""
    keys = streams.model_keys(11, range(1 << 16))
    assert torch.unique(keys[:, 0]).numel() == torch.unique(keys[:, 1]).numel() == 1 << 16
    keys = keys[:512]
    bases = [streams._bases(keys, step, streams.Stream.PRIVATE_SAMPLE, torch.device("cpu")) for step in range(512)]
    low = torch.cat([b[0] for b in bases])
    high = torch.cat([b[1] for b in bases])
    order = torch.argsort(low)
    same = (low[order][1:] == low[order][:-1]).nonzero()[:, 0]
    assert same.numel() > 0
    assert bool((high[order[same]] != high[order[same + 1]]).all())


def test_normal_draws_are_prefixes_of_longer_requests():
    """Draw j depends on j only, across the hashed head and the generator blocks (the engine's padding noise
    is asked for over batch widths that depend on the other models of a chunk)."""
    keys = streams.model_keys(2, range(3))
    head, block = streams.HASHED_NORMALS, streams.NORMAL_BLOCK
    longest = streams.normal(keys, 4, streams.Stream.PRIVATE_PAD, head + 2 * block + 100)
    for count in (0, 1, 15, 16, 17, head - 1, head, head + 1, head + 15, head + block, head + block + 1):
        assert torch.equal(streams.normal(keys, 4, streams.Stream.PRIVATE_PAD, count), longest[:, :count]), count


def test_normal_draws_are_standard_normal():
    """Kolmogorov–Smirnov tests against N(0, 1) of the hashed head (3 models × 4,096 draws) and of a
    generator block (3 × 16,384); adjacent draws (a Box–Muller pair) are uncorrelated (within 4 standard
    errors: a false alarm has probability 6e-5). Each KS test rejects a correct sampler with probability
    1e-4; the seed is fixed, so the outcome is deterministic."""
    keys = streams.model_keys(9, range(3))
    head = streams.HASHED_NORMALS
    draws = streams.normal(keys, 0, streams.Stream.NOISE, head + streams.NORMAL_BLOCK, dtype=torch.float64)
    for part in (draws[:, :head], draws[:, head:]):
        assert stats.kstest(part.flatten().numpy(), "norm").pvalue > 1e-4
    pairs = draws[:, :head]
    correlation = float(torch.corrcoef(torch.stack([pairs[:, 0::2].flatten(), pairs[:, 1::2].flatten()]))[0, 1])
    assert abs(correlation) < 4 / math.sqrt(pairs[:, 0::2].numel())


def test_poisson_sample_does_not_depend_on_how_many_gaps_are_drawn_at_once(monkeypatch):
    """Gap j always comes from uniform j of stream A: a first draw too short for most models (the
    follow-up rounds then run on every step) gives the same batches as the default width."""
    keys = streams.model_keys(4, range(16))
    expected = [streams.poisson_sample(keys, step, 500, 0.1) for step in range(5)]
    monkeypatch.setattr(streams, "POISSON_WIDTH_SIGMAS", -6.0)
    for step, (indices, valid) in enumerate(expected):
        again, valid_again = streams.poisson_sample(keys, step, 500, 0.1)
        assert torch.equal(again, indices) and torch.equal(valid_again, valid)
