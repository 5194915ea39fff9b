"""One-run manifests are untrusted input bound to their training (fdp_audit/auditing/one_run/manifest.py): the secrets
are drawn again from the seed, the seed is the training's, the weights name their release, a repeated JSON key is
refused, and under FDP_AUDIT_HMAC_KEY the manifest carries a MAC. Each case was accepted before (a caught no-clip
training turned into a PASS that `gate` let through)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from fdp_audit.auditing.integrity import HMAC_KEY_VARIABLE
from fdp_audit.auditing.one_run.manifest import draw_secrets


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A no-clip training caught by its 400 gradient canaries (seed 0), and a correct one of seed 1."""
    from fdp_audit.cli import main
    from tests.conftest import small_config, write_yaml

    root = tmp_path_factory.mktemp("manifests")
    out = {}
    for name, seed in (("dp_sgd_no_clip", 0), ("dp_sgd", 1)):
        raw = small_config(name, seed=seed, mechanism={"noise_multiplier": 2.0, "sample_rate": 0.2, "steps": 30})
        config = write_yaml(root / f"{name}.yaml", raw)
        assert main(["train", str(config), "--canaries", "400", "--out", str(root / name / "model.pt")]) == 0
        out[name] = root / name
    return out


def _copy(folder, tmp_path):
    copied = tmp_path / "copy"
    shutil.copytree(folder, copied, ignore=shutil.ignore_patterns("out"))
    return copied, json.loads((copied / "model.canaries.json").read_text())


def _audit(cli, folder):
    return cli("audit", folder / "model.pt", "--canaries", folder / "model.canaries.json", "--out", folder / "out")


def test_the_caught_training_stays_caught(trained, cli):
    result = _audit(cli, trained["dp_sgd_no_clip"])
    assert result.code == 1 and "VIOLATION" in result.out


def test_flipped_secrets_are_refused(trained, cli, tmp_path, one_line_error):
    folder, manifest = _copy(trained["dp_sgd_no_clip"], tmp_path)
    (folder / "model.canaries.json").write_text(json.dumps({**manifest,
                                                            "secrets": [1 - s for s in manifest["secrets"]]}))
    result = _audit(cli, folder)
    assert result.code == 2 and "400 of 400 secrets are not the ones drawn" in one_line_error(result.err)
    assert not (folder / "out").exists()


def test_an_edited_seed_is_refused_with_or_without_its_secrets(trained, cli, tmp_path, one_line_error):
    folder, manifest = _copy(trained["dp_sgd_no_clip"], tmp_path)
    (folder / "model.canaries.json").write_text(json.dumps({**manifest, "seed": 5}))
    assert "not the ones drawn from the manifest's seed 5" in one_line_error(_audit(cli, folder).err)
    consistent = {**manifest, "seed": 5, "secrets": draw_secrets(5, 400, 2).tolist()}
    (folder / "model.canaries.json").write_text(json.dumps(consistent))
    result = _audit(cli, folder)
    assert result.code == 2 and "seed 5 is not the checkpoint's seed 0" in one_line_error(result.err)


def test_a_repeated_key_is_refused(trained, cli, tmp_path, one_line_error):
    folder, manifest = _copy(trained["dp_sgd_no_clip"], tmp_path)
    text = json.dumps(manifest)
    flipped = json.dumps([1 - s for s in manifest["secrets"]])
    (folder / "model.canaries.json").write_text(text[:-1] + f', "secrets": {flipped}}}')
    result = _audit(cli, folder)
    assert result.code == 2 and "the key 'secrets' appears twice" in one_line_error(result.err)


def test_a_swapped_release_with_a_redigested_manifest_is_refused(trained, cli, tmp_path, one_line_error):
    """The other training's release (same shapes), its digest written into the manifest: the checkpoint names the
    release it was trained with."""
    folder, manifest = _copy(trained["dp_sgd_no_clip"], tmp_path)
    other = trained["dp_sgd"] / "model.canary-release.pt"
    shutil.copy(other, folder / "model.canary-release.pt")
    digest = hashlib.sha256(other.read_bytes()).hexdigest()
    (folder / "model.canaries.json").write_text(json.dumps({**manifest, "release_sha256": digest}))
    result = _audit(cli, folder)
    assert result.code == 2 and "not the one the weights were trained with" in one_line_error(result.err)


def test_under_the_key_an_edited_manifest_does_not_verify(trained, cli, tmp_path, one_line_error, monkeypatch,
                                                          write_yaml, small_config):
    """With FDP_AUDIT_HMAC_KEY at both steps: the manifest carries a MAC; a consistent forgery (another seed and
    the secrets drawn from it) fails it, and a manifest written without the key is refused."""
    monkeypatch.setenv(HMAC_KEY_VARIABLE, "ci-secret")
    raw = small_config("dp_sgd_no_clip", mechanism={"noise_multiplier": 2.0, "sample_rate": 0.2, "steps": 30})
    config = write_yaml(tmp_path / "c.yaml", raw)
    folder = tmp_path / "keyed"
    assert cli("train", config, "--canaries", "400", "--out", folder / "model.pt").code == 0
    manifest = json.loads((folder / "model.canaries.json").read_text())
    assert len(manifest["mac"]) == 64
    assert _audit(cli, folder).code == 1
    forged = {**manifest, "seed": 5, "secrets": draw_secrets(5, 400, 2).tolist()}
    (folder / "model.canaries.json").write_text(json.dumps(forged))
    assert "MAC mismatch" in one_line_error(_audit(cli, folder).err)
    unkeyed, _ = _copy(trained["dp_sgd_no_clip"], tmp_path)
    assert "no MAC, but FDP_AUDIT_HMAC_KEY is set" in one_line_error(_audit(cli, unkeyed).err)


def test_a_seed_0_manifest_with_a_seed_1_config_is_refused(cli, tmp_path, one_line_error, write_yaml, small_config):
    """Input canaries inserted for the seed-0 config, the weights audited with a seed-1 config."""
    import torch
    from safetensors.torch import save_file

    from fdp_audit.auditing.one_run.canaries import insert_record_canaries
    from fdp_audit.config import load_config

    (tmp_path / "model.py").write_text("from torch import nn\n\n"
                                       "def make(n, k):\n    return nn.Sequential(nn.Linear(n, k))\n")
    raw = small_config("dp_sgd", rows=600, model={"kind": "module", "factory": "model.py:make"})
    config0 = write_yaml(tmp_path / "seed0.yaml", raw)
    config1 = write_yaml(tmp_path / "seed1.yaml", {**raw, "seed": 1})
    dataset = insert_record_canaries(load_config(config0), 50, tmp_path / "model.canaries.json")
    x, y = dataset[:]
    save_file({"0.weight": torch.zeros(2, x.shape[1]), "0.bias": torch.zeros(2)}, tmp_path / "model.safetensors")
    result = cli("audit", tmp_path / "model.safetensors", "--config", config1, "--canaries",
                 tmp_path / "model.canaries.json", "--out", tmp_path / "out")
    assert result.code == 2 and "seed 0 is not the config's seed 1" in one_line_error(result.err)
    assert not (tmp_path / "out").exists()


def _peak_since_reset() -> tuple[int, int] | None:
    """(VmRSS now, after resetting VmHWM to it) in bytes, or None where Linux's peak reset is unavailable."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return None
    return _status("VmRSS"), _status("VmHWM")


def _status(key: str) -> int:
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith(key + ":"))


def test_a_spooled_release_takes_bounded_memory_and_writes_the_in_memory_bytes(tmp_path):
    """10,000 canaries and 1,000 null coordinates over 3,072 steps: 135 MB in memory, spooled to disk 256 steps
    (the observer's flush) at a time. Spooling and writing it raise the process's peak resident memory by less
    than a third of that (measured: about 10 MB, a flush's rows and the 8 MB chunk it is copied in), and the
    file is byte for byte the in-memory release's."""
    import torch

    from fdp_audit.auditing.one_run.manifest import ReleaseSpool, read_release, release_bytes

    count, null, steps, flush = 10_000, 1_000, 3_072, 256
    generator = torch.Generator().manual_seed(0)
    final = torch.randn(count + null, generator=generator)
    rows = torch.empty(flush, count + null)  # one buffer: the test's own allocations would grow the heap

    def chunks():
        generator.manual_seed(1)
        for _ in range(steps // flush):
            yield torch.randn(flush, count + null, generator=generator, out=rows)

    baseline = _peak_since_reset()
    spool = ReleaseSpool(count, null, tmp_path)
    for rows in chunks():
        spool.append(rows)
    digest = spool.write(tmp_path / "spooled.pt", final[:count], final[count:], negate=True)
    spool.close()
    if baseline is not None:
        increment = _status("VmHWM") - baseline[0]
        assert increment < steps * (count + null) * 4 / 3, f"peak grew by {increment / 2 ** 20:.0f} MiB"
    updates = -torch.cat([chunk.clone() for chunk in chunks()])
    written = (tmp_path / "spooled.pt").read_bytes()
    assert written == release_bytes(updates[:, :count], updates[:, count:], final[:count], final[count:])
    assert hashlib.sha256(written).hexdigest() == digest
    manifest = {"count": count, "null": null, "steps": steps, "release_sha256": digest}
    read = read_release(tmp_path / "spooled.pt", manifest)
    assert read.updates.shape == (steps, count) and (read.updates_null == updates[:, count:].double().numpy()).all()


def test_a_release_of_the_previous_format_is_still_read(tmp_path):
    """Releases written before the safetensors layout (one torch.save of format version 1) read as they did."""
    import io

    import torch

    from fdp_audit.auditing.one_run.manifest import read_release

    payload = {"format_version": 1, "final": torch.ones(3), "final_null": torch.zeros(2),
               "updates": torch.arange(12.0).reshape(4, 3), "updates_public": torch.zeros(0, 3),
               "updates_null": torch.ones(4, 2)}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    (tmp_path / "old.pt").write_bytes(buffer.getvalue())
    manifest = {"count": 3, "null": 2, "steps": 4, "release_sha256": hashlib.sha256(buffer.getvalue()).hexdigest()}
    release = read_release(tmp_path / "old.pt", manifest)
    assert (release.updates == payload["updates"].double().numpy()).all() and release.final.tolist() == [1.0] * 3
