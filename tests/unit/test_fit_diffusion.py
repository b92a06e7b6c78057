"""Diffusion in envman fit: parameter counts against the published totals, the pipeline's frozen parts, and
what the activation accounting (envman/fit/diffusion.py) does with checkpointing, attention, LoRA and ControlNet."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from envman.app.fit import FitOptions, estimate_run, run_fit
from envman.fit import diffusion
from envman.fit.activations import activations
from envman.fit.estimate import estimate
from envman.fit.runspec import Setup

ROOT = Path(__file__).resolve().parents[2]
MODELS = {m["id"]: m for m in yaml.safe_load((ROOT / "matrices" / "models.yaml").read_text())["models"]}
PIPELINE = ROOT / "tests" / "fixtures" / "fit" / "sd15-pipeline"


@pytest.fixture(autouse=True)
def _shipped():
    """The catalog's diffusion entries are shipped data (matrices/models.yaml), not the frozen fixture matrix."""
    from test_fit_reference import shipped_data

    with shipped_data():
        yield


def pipeline(model_id: str):
    e = MODELS[model_id]
    return diffusion.denoiser(e["config"], tuple(diffusion.frozen_part(f["config"]) for f in e["frozen"]))


@pytest.mark.parametrize(("model_id", "part", "published"), [
    ("stable-diffusion-v1-5", "text_encoder", 123e6),  # CompVis/stable-diffusion-v1-4 model card: 123M text encoder
    ("stable-diffusion-xl-base-1.0", "text_encoders", 817e6),  # SDXL paper, Table 1: 817M
    ("flux.1-dev", "text_encoder_2", 4.76e9),  # T5 v1.1 XXL encoder (google/t5-v1_1-xxl: 11B with the decoder)
])
def test_frozen_parts_match_the_published_counts(model_id, part, published):
    arch = pipeline(model_id)
    texts = [t for t in arch.towers if t.task == "text-encoder"]
    got = {"text_encoder": texts[0].params, "text_encoders": sum(t.params for t in texts),
           "text_encoder_2": texts[-1].params}[part]
    assert abs(got - published) / published <= 0.02, got


def test_the_vae_is_the_same_autoencoder_for_sd_and_sdxl_and_flux_drops_its_quant_convs():
    sd, xl, fl = (next(t for t in pipeline(m).towers if t.task == "vae") for m in
                  ("stable-diffusion-v1-5", "stable-diffusion-xl-base-1.0", "flux.1-dev"))
    assert sd.params == xl.params and 83e6 < sd.params < 84e6 and fl.params != sd.params


def test_a_pipeline_folder_reads_as_the_catalog_entry():
    _, source, arch, _, _, est = estimate_run(FitOptions(model=str(PIPELINE), batch=1))
    assert source.endswith("model_index.json") and arch.variant == "unet"
    ref = estimate_run(FitOptions(model="stable-diffusion-v1-5", batch=1))[5]
    assert est.peak_bytes == ref.peak_bytes and len(arch.towers) == 2


def test_frozen_parts_are_counted_in_the_scripts_weight_dtype():
    arch = pipeline("stable-diffusion-v1-5")
    frozen = sum(t.params for t in arch.towers)
    fp32 = estimate(arch, Setup(precision="fp32", image_size=512)).weights_bytes
    fp16 = estimate(arch, Setup(precision="fp16-mixed", image_size=512)).weights_bytes
    assert fp32 - fp16 == frozen * 2  # the UNet stays fp32 (the master), the frozen parts drop to fp16


def test_ema_keeps_one_fp32_copy_of_the_trained_weights():
    arch = pipeline("stable-diffusion-v1-5")
    base = Setup(precision="fp16-mixed", image_size=512)
    assert estimate(arch, replace(base, ema=True)).weights_bytes - estimate(arch, base).weights_bytes == 4 * arch.params


def test_checkpointing_keeps_less_and_flash_less_than_eager():
    arch = pipeline("stable-diffusion-v1-5")
    s = Setup(precision="fp16-mixed", image_size=512, batch=2, attention="eager")
    eager, flash = activations(arch, s), activations(arch, replace(s, attention="flash"))
    assert eager.saved > flash.saved > flash.ckpt_saved > 0
    # eager attention keeps 8 heads × 4096² probabilities per self-attention at 64×64 latents: > 1 GiB a sample
    assert eager.saved - flash.saved > 2 * 2**30
    full = estimate(arch, replace(s, attention="flash"))
    assert estimate(arch, replace(s, attention="flash", grad_checkpointing=True)).peak_bytes <= full.peak_bytes


def test_lora_keeps_far_less_than_full_fine_tuning_and_only_the_targets_train():
    arch = pipeline("stable-diffusion-xl-base-1.0")
    s = Setup(precision="fp16-mixed", image_size=1024, attention="flash",
              lora_targets=("to_q", "to_k", "to_v", "to_out.0"), lora_rank=4, base_bytes=2, adapter_bytes=4)
    full, lora = estimate(arch, s), estimate(arch, replace(s, method="lora"))
    assert lora.trainable_params < 0.01 * full.trainable_params and lora.peak_bytes < full.peak_bytes / 3


def test_a_controlnet_trains_its_copy_and_steers_a_frozen_unet_without_its_down_path():
    arch = pipeline("controlnet-sd15")
    unet = next(t for t in arch.towers if t.unet is not None)
    d, T0 = diffusion.Dtypes(4, 4, 4, 4), 4096
    down = [s for s in unet.unet.stages if s.kind == "down"]
    t = diffusion.Tally()
    for s in down:
        diffusion._stage(t, d, s, T0, 768, 77, diffusion.Train("none"))
    assert t.saved == 0 and t.flops > 0  # no gradient reaches the UNet's down path: nothing kept, still computed
    est = estimate(arch, Setup(precision="fp32", image_size=512))
    assert est.trainable_params == arch.params and est.weights_bytes == 4 * (arch.params + sum(x.params for x in arch.towers))


def test_the_vae_encoding_is_its_own_phase_before_the_step():
    arch = pipeline("stable-diffusion-xl-base-1.0")
    s = Setup(method="lora", precision="fp16-mixed", image_size=1024, grad_checkpointing=True, attention="flash",
              lora_targets=("to_q",), lora_rank=4, base_bytes=2, adapter_bytes=4)
    assert estimate(arch, s).phase == "encode"  # 1024 px images through the VAE encoder outweigh a checkpointed step


def test_the_diffusers_stack_is_the_default_for_a_diffusion_model_and_rates_are_images():
    res = run_fit(FitOptions(model="sd15", batch=1, targets=("a100",)))
    assert res.estimate.setup.stack == "diffusers" and res.estimate.unit == "images"
    assert res.estimate.setup.image_size == 512 and res.targets[0].throughput > 0


def test_a_pipeline_part_that_cannot_be_read_is_named_never_skipped(tmp_path):
    import os
    import shutil

    from envman.errors import UsageError
    from envman.fit.catalog import load_pipeline, raw_config

    folder = tmp_path / "sd"
    shutil.copytree(PIPELINE, folder)
    hint = "a diffusers pipeline folder, as downloaded"
    vae = folder / "vae" / "config.json"
    vae.unlink()
    os.mkfifo(vae)  # was read as "no vae" by is_file()
    with pytest.raises(UsageError) as err:
        load_pipeline(folder)
    assert (err.value.message, err.value.hint) == (f"{vae}: not a regular file (a FIFO, socket or device)", hint)
    vae.unlink()
    vae.write_text("[1, 2]")
    with pytest.raises(UsageError) as err:
        load_pipeline(folder)
    assert (err.value.message, err.value.hint) == (f"{vae}: not a JSON object", hint)
    vae.write_text("{")
    with pytest.raises(UsageError) as err:  # --trace's reader, a traceback before
        raw_config(str(vae))
    assert err.value.message == f"{vae}: not valid JSON (line 1, column 2: Expecting property name enclosed in double quotes)"
