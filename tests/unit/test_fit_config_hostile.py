"""A config.json is a file the user hands `envman fit` (or the model's hub page does): any value of any key either
gives an estimate or an ArchError naming the key — never another exception (a traceback). Found when `num_labels:
"ten"` crashed ViT/ResNet and a ControlNet's bad `conditioning_channels` crashed after the unet's check."""
from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from envman.fit.architectures import arch_from_config
from envman.fit.shapes import ArchError

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = [m["config"] for m in yaml.safe_load((ROOT / "matrices" / "models.yaml").read_text())["models"]
           if isinstance(m.get("config"), dict)]
# the keys the model catalog uses, plus the ones a family reads with a default (absent from the catalog's configs)
KEYS = sorted({k for c in CONFIGS for k in c} | {"num_labels", "id2label", "conditioning_channels",
                                                 "conditioning_embedding_out_channels", "transformer_layers_per_block",
                                                 "num_attention_heads", "layer_type", "architectures"})
JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
                    max_leaves=8)


def test_the_catalog_has_configs_of_every_kind():
    assert len(CONFIGS) >= 20 and len(KEYS) >= 40


@settings(max_examples=600, deadline=None)
@given(i=st.integers(0, len(CONFIGS) - 1), key=st.sampled_from(KEYS), value=JSON)
def test_any_value_of_any_config_key_is_estimated_or_refused_naming_a_key(i, key, value):
    cfg = {**CONFIGS[i], key: value}
    try:
        arch = arch_from_config(cfg)
    except ArchError as e:
        assert e.problems and all(isinstance(p, str) and p for p in e.problems)
        return
    assert arch.params > 0
